/*
 * The app's one screen: the goal, the model files (picked from storage, or
 * pushed with adb to the app's external files dir), the settings, Start,
 * Resume (the latest episode, if it was interrupted) and Stop, and where the
 * latest trajectory is. Views are built in code so the
 * Java sources need no generated R class; settings are kept as the strings
 * the user typed and checked by AgentSettings before anything starts.
 */
package com.btl.agent;

import android.app.Activity;
import android.content.Intent;
import android.content.SharedPreferences;
import android.net.Uri;
import android.os.Bundle;
import android.provider.Settings;
import android.text.InputType;
import android.widget.Button;
import android.widget.EditText;
import android.widget.LinearLayout;
import android.widget.ScrollView;
import android.widget.TextView;
import com.btl.agent.core.AgentSettings;
import com.btl.agent.core.Trajectories;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

public final class MainActivity extends Activity {
    private static final int PICK_MODEL = 1;
    private static final int PICK_MMPROJ = 2;
    private static final String PREFS = "settings";
    private static final String GOAL = "goal";

    /** Setting key -> its text field, in display order. */
    private final Map<String, EditText> fields = new LinkedHashMap<>();
    private TextView status;

    @Override
    protected void onCreate(Bundle savedInstanceState) {
        super.onCreate(savedInstanceState);
        LinearLayout column = new LinearLayout(this);
        column.setOrientation(LinearLayout.VERTICAL);
        column.setPadding(32, 32, 32, 32);

        field(column, GOAL, "Goal, e.g. Turn on Wi-Fi", InputType.TYPE_CLASS_TEXT);
        field(column, AgentSettings.MODEL, "Model GGUF (absolute path)", InputType.TYPE_CLASS_TEXT);
        button(column, "Pick model file…", () -> pick(PICK_MODEL));
        field(column, AgentSettings.MMPROJ, "Vision projector (mmproj) GGUF", InputType.TYPE_CLASS_TEXT);
        button(column, "Pick mmproj file…", () -> pick(PICK_MMPROJ));
        field(column, AgentSettings.MAX_PIXELS, "max_pixels (default 4014080)", InputType.TYPE_CLASS_NUMBER);
        field(column, AgentSettings.THREADS, "threads (default 4)", InputType.TYPE_CLASS_NUMBER);
        field(column, AgentSettings.BACKEND, "backend: cpu or vulkan", InputType.TYPE_CLASS_TEXT);
        field(column, AgentSettings.VOTE, "vote N (default 1)", InputType.TYPE_CLASS_NUMBER);
        field(column, AgentSettings.MAX_STEPS, "max steps (default 30)", InputType.TYPE_CLASS_NUMBER);
        field(column, AgentSettings.PROFILE, "profile: btl-ui or btl-extended", InputType.TYPE_CLASS_TEXT);
        field(column, AgentSettings.CONFIRM, "sensitive actions: ask, deny or allow", InputType.TYPE_CLASS_TEXT);

        button(column, "Start", this::start);
        button(column, "Resume latest episode", this::resume);
        button(column, "Stop", () -> startService(new Intent(this, AgentService.class)
                .setAction(AgentService.ACTION_STOP)));
        button(column, "Latest trajectory", this::showLatest);
        button(column, "Accessibility settings", () -> startActivity(
                new Intent(Settings.ACTION_ACCESSIBILITY_SETTINGS)));
        status = new TextView(this);
        status.setTextIsSelectable(true);
        column.addView(status);

        ScrollView scroll = new ScrollView(this);
        scroll.addView(column);
        setContentView(scroll);
        load();
        if (BtlAccessibilityService.current() == null) {
            status.setText("The btl accessibility service is off: enable it under Accessibility settings.");
        }
    }

    private void field(LinearLayout column, String key, String hint, int inputType) {
        EditText edit = new EditText(this);
        edit.setHint(hint);
        edit.setInputType(inputType);
        column.addView(edit);
        fields.put(key, edit);
    }

    private void button(LinearLayout column, String label, Runnable action) {
        Button button = new Button(this);
        button.setText(label);
        button.setOnClickListener(v -> action.run());
        column.addView(button);
    }

    private File modelsDir() {
        return new File(getExternalFilesDir(null), "models");
    }

    private File trajectoriesDir() {
        return new File(getExternalFilesDir(null), Trajectories.FOLDER);
    }

    private void load() {
        SharedPreferences prefs = getSharedPreferences(PREFS, MODE_PRIVATE);
        for (Map.Entry<String, EditText> f : fields.entrySet()) {
            f.getValue().setText(prefs.getString(f.getKey(), ""));
        }
        // Files pushed with adb to the default place are found without picking.
        File model = new File(modelsDir(), "model.gguf");
        File mmproj = new File(modelsDir(), "mmproj.gguf");
        if (text(AgentSettings.MODEL).isEmpty() && model.isFile()) {
            fields.get(AgentSettings.MODEL).setText(model.getPath());
        }
        if (text(AgentSettings.MMPROJ).isEmpty() && mmproj.isFile()) {
            fields.get(AgentSettings.MMPROJ).setText(mmproj.getPath());
        }
    }

    private String text(String key) {
        return fields.get(key).getText().toString().trim();
    }

    private Map<String, String> values() {
        Map<String, String> values = new HashMap<>();
        for (String key : fields.keySet()) {
            values.put(key, text(key));
        }
        return values;
    }

    /** The settings as typed, saved for the next launch; null (and said why) while an episode runs. */
    private Map<String, String> takeValues() {
        if (AgentService.running) {
            status.setText("An episode is running: Stop it (in its notification) before starting another.");
            return null;
        }
        Map<String, String> values = values();
        SharedPreferences.Editor editor = getSharedPreferences(PREFS, MODE_PRIVATE).edit();
        for (Map.Entry<String, String> v : values.entrySet()) {
            editor.putString(v.getKey(), v.getValue());
        }
        editor.apply();
        return values;
    }

    private void start() {
        Map<String, String> values = takeValues();
        if (values == null) {
            return;
        }
        String session;
        try {
            session = AgentSettings.parse(values).toSessionJson(values.get(GOAL));
        } catch (IllegalArgumentException e) {
            status.setText(e.getMessage());
            return;
        }
        File root = trajectoriesDir();
        if (!root.isDirectory() && !root.mkdirs()) {
            status.setText("cannot create " + root);
            return;
        }
        File dir = Trajectories.newEpisodeDir(root, System.currentTimeMillis());
        launch(session, dir, false);
        status.setText("Running; trajectory in " + dir);
    }

    /**
     * Goes on with the latest episode where it stopped, with the model files
     * set now; the native side refuses (and the failure notification says
     * why) an episode that ended or that another model recorded.
     */
    private void resume() {
        Map<String, String> values = takeValues();
        if (values == null) {
            return;
        }
        File latest = Trajectories.latest(trajectoriesDir());
        if (latest == null) {
            status.setText("No trajectory yet.");
            return;
        }
        String request;
        try {
            request = AgentSettings.parsePolicy(values).toResumeJson();
        } catch (IllegalArgumentException e) {
            status.setText(e.getMessage());
            return;
        }
        launch(request, latest, true);
        status.setText("Resuming; trajectory in " + latest);
    }

    private void launch(String request, File dir, boolean resume) {
        // Claimed here, on the UI thread, so a second tap before the service
        // starts is refused too; the episode's end releases it.
        AgentService.running = true;
        startForegroundService(new Intent(this, AgentService.class)
                .setAction(AgentService.ACTION_START)
                .putExtra(AgentService.EXTRA_SESSION, request)
                .putExtra(AgentService.EXTRA_DIR, dir.getPath())
                .putExtra(AgentService.EXTRA_RESUME, resume));
    }

    private void showLatest() {
        File latest = Trajectories.latest(trajectoriesDir());
        if (latest == null) {
            status.setText("No trajectory yet.");
            return;
        }
        String episode;
        try {
            episode = new String(Files.readAllBytes(new File(latest, "episode.json").toPath()),
                    StandardCharsets.UTF_8);
        } catch (IOException e) {
            episode = "episode.json unreadable: " + e.getMessage();
        }
        String last = AgentService.lastResult;
        status.setText("Latest trajectory: " + latest + "\n\nPull it with:\nadb pull " + latest + "\n\n"
                + (last == null ? "" : "Last result: " + last + "\n\n") + episode);
    }

    private void pick(int which) {
        Intent intent = new Intent(Intent.ACTION_OPEN_DOCUMENT).addCategory(Intent.CATEGORY_OPENABLE)
                .setType("*/*");
        startActivityForResult(intent, which);
    }

    @Override
    protected void onActivityResult(int requestCode, int resultCode, Intent data) {
        super.onActivityResult(requestCode, resultCode, data);
        if (resultCode != RESULT_OK || data == null || data.getData() == null) {
            return;
        }
        // llama.cpp opens files by path, so a picked document is copied into
        // the app's models folder first (off the UI thread: GGUFs are large).
        String key = requestCode == PICK_MODEL ? AgentSettings.MODEL : AgentSettings.MMPROJ;
        File target = new File(modelsDir(), requestCode == PICK_MODEL ? "model.gguf" : "mmproj.gguf");
        Uri uri = data.getData();
        status.setText("Copying " + uri + " to " + target + "…");
        new Thread(() -> {
            String message;
            try {
                copy(uri, target);
                message = "Copied to " + target;
                runOnUiThread(() -> fields.get(key).setText(target.getPath()));
            } catch (IOException | RuntimeException e) {
                // A document provider may refuse with a SecurityException.
                message = "Copy failed: " + e;
            }
            String shown = message;
            runOnUiThread(() -> status.setText(shown));
        }, "btl-copy").start();
    }

    /**
     * Copies running now, in every instance of this activity: a rotation
     * makes a new one while the copy thread of the old one goes on.
     */
    private static int copying;

    private void copy(Uri uri, File target) throws IOException {
        File dir = target.getParentFile();
        if (!dir.isDirectory() && !dir.mkdirs()) {
            throw new IOException("cannot create " + dir);
        }
        File partial;
        synchronized (MainActivity.class) {
            // While no copy runs, every part in the folder is one a copy
            // killed with the app left behind: gigabytes nobody reads.
            if (copying == 0) {
                File[] parts = dir.listFiles((d, name) -> name.endsWith(".partial")
                        && (name.startsWith("model.gguf.") || name.startsWith("mmproj.gguf.")));
                for (File part : parts == null ? new File[0] : parts) {
                    part.delete();
                }
            }
            // A name of its own: a second pick while the first still copies
            // must not write into the same file.
            partial = File.createTempFile(target.getName() + ".", ".partial", dir);
            copying++;
        }
        boolean done = false;
        try {
            try (InputStream in = getContentResolver().openInputStream(uri);
                    FileOutputStream out = new FileOutputStream(partial)) {
                if (in == null) {
                    throw new IOException("cannot open " + uri);
                }
                byte[] buffer = new byte[1 << 20];
                for (int n; (n = in.read(buffer)) > 0; ) {
                    out.write(buffer, 0, n);
                }
                // On disk before the rename: a power cut after it must not
                // leave the model's name on a file whose bytes never arrived.
                out.getFD().sync();
            }
            // Renamed only when complete, so a half-copied model is never loaded.
            if (!partial.renameTo(target)) {
                throw new IOException("cannot rename " + partial + " to " + target);
            }
            done = true;
        } finally {
            // A model is gigabytes: a failed copy does not keep its part.
            if (!done) {
                partial.delete();
            }
            synchronized (MainActivity.class) {
                copying--;
            }
        }
    }
}
