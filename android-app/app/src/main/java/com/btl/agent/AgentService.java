/*
 * The foreground service that runs one episode at a time: the native agent
 * runs on a worker thread (never the UI thread), the notification shows the
 * step in progress and carries a Stop button, and a sensitive action (the
 * safety gate's "ask") posts a notification with Allow / Decline buttons
 * that the agent's thread waits on; no answer within five minutes declines.
 * Stop holds from the moment it is pressed, the model's loading included; an
 * episode that fails leaves a notification saying why.
 *
 * Intents: ACTION_START (extras: the session JSON and the trajectory
 * directory; with EXTRA_RESUME, the resume request and the directory of an
 * interrupted episode), ACTION_STOP, ACTION_ANSWER (extra: allow).
 */
package com.btl.agent;

import android.app.Notification;
import android.app.NotificationChannel;
import android.app.NotificationManager;
import android.app.PendingIntent;
import android.app.Service;
import android.content.Intent;
import android.content.pm.ServiceInfo;
import android.os.Build;
import android.os.IBinder;
import android.util.Log;
import com.btl.agent.core.AgentException;
import com.btl.agent.core.AgentListener;
import com.btl.agent.core.NativeAgent;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.TimeUnit;

public final class AgentService extends Service {
    public static final String ACTION_START = "com.btl.agent.START";
    public static final String ACTION_STOP = "com.btl.agent.STOP";
    public static final String ACTION_ANSWER = "com.btl.agent.ANSWER";
    public static final String EXTRA_SESSION = "session";
    public static final String EXTRA_DIR = "dir";
    public static final String EXTRA_ALLOW = "allow";
    /** With ACTION_START: EXTRA_SESSION is a resume request and EXTRA_DIR the episode to go on with. */
    public static final String EXTRA_RESUME = "resume";

    private static final String TAG = "btl";
    private static final String CHANNEL_PROGRESS = "progress";
    private static final String CHANNEL_CONFIRM = "confirm";
    private static final int ID_PROGRESS = 1;
    private static final int ID_CONFIRM = 2;
    private static final int ID_FAILED = 3;
    private static final long CONFIRM_TIMEOUT_S = 300;

    /** The last episode's end, as MainActivity shows it; null while one runs. */
    public static volatile String lastResult;
    /** Whether an episode runs, so MainActivity refuses a second Start in words. */
    public static volatile boolean running;

    private final SynchronousQueue<Boolean> answers = new SynchronousQueue<>();
    private NativeAgent agent;
    private Thread worker;
    /**
     * Stop was asked for before the agent existed: loading a model takes
     * seconds to minutes, and a Stop then must still end the episode before
     * its first action.
     */
    private boolean stopRequested;
    /** The latest start request seen, so the episode's end stops only a service no newer request needs. */
    private int lastStartId;

    @Override
    public IBinder onBind(Intent intent) {
        return null;
    }

    @Override
    public void onCreate() {
        super.onCreate();
        NotificationManager manager = getSystemService(NotificationManager.class);
        manager.createNotificationChannel(
                new NotificationChannel(CHANNEL_PROGRESS, "Agent progress", NotificationManager.IMPORTANCE_LOW));
        manager.createNotificationChannel(new NotificationChannel(
                CHANNEL_CONFIRM, "Sensitive action confirmations", NotificationManager.IMPORTANCE_HIGH));
    }

    @Override
    public int onStartCommand(Intent intent, int flags, int startId) {
        String action = intent == null ? "" : intent.getAction();
        // One block with the episode's end, which stops the service for the
        // latest request it has seen: a request is either seen there or
        // handled here with the episode's state as it ends.
        synchronized (this) {
            lastStartId = startId;
            if (ACTION_START.equals(action)) {
                start(intent.getStringExtra(EXTRA_SESSION), intent.getStringExtra(EXTRA_DIR),
                        intent.getBooleanExtra(EXTRA_RESUME, false));
                return START_NOT_STICKY;
            }
            if (ACTION_STOP.equals(action)) {
                stopEpisode();
            } else if (ACTION_ANSWER.equals(action)) {
                // offer() only succeeds while the agent waits for an answer,
                // so a stale tap on an old notification changes nothing.
                answers.offer(intent.getBooleanExtra(EXTRA_ALLOW, false));
                getSystemService(NotificationManager.class).cancel(ID_CONFIRM);
            }
            // A Stop or an answer that arrives after the episode ended.
            if (worker == null) {
                stopSelf(startId);
            }
        }
        return START_NOT_STICKY;
    }

    private synchronized void start(String session, String dir, boolean resume) {
        if (worker != null) {
            Log.w(TAG, "an episode is already running");
            return;
        }
        Notification first = progress("Starting…");
        if (Build.VERSION.SDK_INT >= 34) {
            startForeground(ID_PROGRESS, first, ServiceInfo.FOREGROUND_SERVICE_TYPE_SPECIAL_USE);
        } else {
            startForeground(ID_PROGRESS, first);
        }
        lastResult = null;
        running = true;
        stopRequested = false;
        getSystemService(NotificationManager.class).cancel(ID_FAILED);
        worker = new Thread(() -> runEpisode(session, dir, resume), "btl-episode");
        worker.start();
    }

    private void runEpisode(String session, String dir, boolean resume) {
        String result = null;
        try {
            BtlAccessibilityService device = BtlAccessibilityService.current();
            if (device == null) {
                throw new AgentException("enable the btl accessibility service in Settings > Accessibility first");
            }
            NativeAgent created = resume ? NativeAgent.resume(session, dir, device, new Listener())
                    : NativeAgent.create(session, dir, device, new Listener());
            synchronized (this) {
                agent = created;
                if (stopRequested) {
                    created.cancel();
                }
            }
            result = created.run();
        } catch (RuntimeException e) {
            Log.e(TAG, "the episode failed", e);
            result = "{\"error\": " + com.btl.agent.core.Json.quote(String.valueOf(e.getMessage())) + "}";
            failed(String.valueOf(e.getMessage()));
        } finally {
            // One block with start(): a Start that comes in meanwhile finds
            // the service either still running this episode or done with it.
            synchronized (this) {
                if (agent != null) {
                    agent.close();
                    agent = null;
                }
                worker = null;
                running = false;
                lastResult = result;
                getSystemService(NotificationManager.class).cancel(ID_CONFIRM);
                stopForeground(STOP_FOREGROUND_REMOVE);
                stopSelf(lastStartId);
            }
        }
    }

    /** A notification that outlives the episode: it failed (no model, no accessibility service…), and why. */
    private void failed(String why) {
        Notification shown = new Notification.Builder(this, CHANNEL_PROGRESS)
                .setSmallIcon(android.R.drawable.ic_dialog_alert)
                .setContentTitle("btl agent: the episode failed")
                .setContentText(why)
                .setStyle(new Notification.BigTextStyle().bigText(why))
                .build();
        getSystemService(NotificationManager.class).notify(ID_FAILED, shown);
    }

    private synchronized void stopEpisode() {
        stopRequested = true;
        if (agent != null) {
            agent.cancel();
        }
        // A pending confirmation is declined rather than left waiting.
        answers.offer(false);
    }

    private Notification progress(String text) {
        Intent stop = new Intent(this, AgentService.class).setAction(ACTION_STOP);
        return new Notification.Builder(this, CHANNEL_PROGRESS)
                .setSmallIcon(android.R.drawable.ic_menu_view)
                .setContentTitle("btl agent")
                .setContentText(text)
                .setOngoing(true)
                .addAction(new Notification.Action.Builder(null, "Stop", service(stop, 1)).build())
                .build();
    }

    private PendingIntent service(Intent intent, int requestCode) {
        return PendingIntent.getService(this, requestCode, intent,
                PendingIntent.FLAG_IMMUTABLE | PendingIntent.FLAG_UPDATE_CURRENT);
    }

    /** The native agent's callbacks, on the episode thread. */
    private final class Listener implements AgentListener {
        @Override
        public void onProgress(int step, String message) {
            getSystemService(NotificationManager.class).notify(ID_PROGRESS, progress("Step " + step + ": " + message));
        }

        @Override
        public boolean confirmSensitive(String goal, String plan, String action, String pattern, String text) {
            Intent allow = new Intent(AgentService.this, AgentService.class).setAction(ACTION_ANSWER)
                    .putExtra(EXTRA_ALLOW, true);
            Intent decline = new Intent(AgentService.this, AgentService.class).setAction(ACTION_ANSWER)
                    .putExtra(EXTRA_ALLOW, false);
            String body = "Plan: " + plan + "\nIt touches \"" + text + "\" (matches \"" + pattern + "\").\nAction: "
                    + action;
            Notification ask = new Notification.Builder(AgentService.this, CHANNEL_CONFIRM)
                    .setSmallIcon(android.R.drawable.ic_dialog_alert)
                    .setContentTitle("Allow a sensitive action?")
                    .setContentText(plan)
                    .setStyle(new Notification.BigTextStyle().bigText(body))
                    .setOngoing(true)
                    .addAction(new Notification.Action.Builder(null, "Allow", service(allow, 2)).build())
                    .addAction(new Notification.Action.Builder(null, "Decline", service(decline, 3)).build())
                    .build();
            getSystemService(NotificationManager.class).notify(ID_CONFIRM, ask);
            try {
                Boolean answer = answers.poll(CONFIRM_TIMEOUT_S, TimeUnit.SECONDS);
                return Boolean.TRUE.equals(answer);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            } finally {
                getSystemService(NotificationManager.class).cancel(ID_CONFIRM);
            }
        }
    }
}
