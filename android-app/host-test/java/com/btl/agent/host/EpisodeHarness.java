/*
 * Host test only: runs whole episodes of the app's native agent
 * (libbtl_android built with feature host-sim) from the JVM, on the virtual
 * phone, across the real JNI boundary. Driven by android-app/native/tests/jvm.rs,
 * which runs it under -Xcheck:jni and reads the trajectories back.
 *
 * Usage: EpisodeHarness WORK_DIR. Prints "RESULT <scenario> <outcome json>"
 * for each episode and "PASS <scenario>" for each check; on the first failed
 * check prints "FAIL <scenario>: <why>" and exits with status 1.
 */
package com.btl.agent.host;

import com.btl.agent.core.AgentException;
import com.btl.agent.core.AgentListener;
import com.btl.agent.core.Json;
import com.btl.agent.core.NativeAgent;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;

public final class EpisodeHarness {
    private static File work;

    /** Records what the agent reported and answers confirmations as told. */
    static final class Listener implements AgentListener {
        final List<String> progress = new ArrayList<>();
        final List<String> confirmations = new ArrayList<>();
        boolean allow;
        boolean throwOnProgress;
        BiConsumer<Integer, String> hook = (step, message) -> { };

        @Override
        public void onProgress(int step, String message) {
            progress.add(step + ": " + message);
            hook.accept(step, message);
            if (throwOnProgress) {
                throw new IllegalStateException("listener broke on purpose");
            }
        }

        @Override
        public boolean confirmSensitive(String goal, String plan, String action, String pattern, String text) {
            confirmations.add(pattern + " | " + text + " | " + action);
            return allow;
        }
    }

    public static void main(String[] args) throws Exception {
        work = new File(args[0]);
        oracleSolvesATask();
        sensitiveActionsAskTheListener(true);
        sensitiveActionsAskTheListener(false);
        unicodeCrossesTheBoundaryBothWays();
        cancelStopsARunningEpisode();
        javaExceptionsEndTheEpisodeCleanly();
        resumeGoesOnAfterADeviceFailure();
        misuseBecomesJavaExceptions();
        System.out.println("ALL PASSED");
    }

    static String config(String goal, String policy, String onSensitive) {
        return "{\"agent\": {\"goal\": " + Json.quote(goal) + ", \"profile\": \"btl-extended\", \"max_steps\": 40,"
                + " \"stability\": {\"poll_interval_ms\": 1, \"timeout_ms\": 20},"
                + " \"safety\": {\"on_sensitive\": " + Json.quote(onSensitive) + "}},"
                + " \"policy\": " + policy + "}";
    }

    static String oracle(String task, long seed) {
        return "{\"kind\": \"oracle\", \"task\": " + Json.quote(task) + ", \"seed\": " + seed + "}";
    }

    static String dir(String scenario) {
        return new File(work, scenario).getPath();
    }

    static String run(String scenario, String config, SimDeviceBridge device, Listener listener) {
        try (NativeAgent agent = NativeAgent.create(config, dir(scenario), device, listener)) {
            String outcome = agent.run();
            System.out.println("RESULT " + scenario + " " + outcome);
            return outcome;
        }
    }

    static void check(String scenario, boolean ok, String why) {
        if (!ok) {
            System.out.println("FAIL " + scenario + ": " + why);
            System.exit(1);
        }
        System.out.println("PASS " + scenario + ": " + why);
    }

    static void oracleSolvesATask() {
        String s = "oracle";
        try (SimPhone phone = new SimPhone("note_create", 3)) {
            SimDeviceBridge device = new SimDeviceBridge(phone);
            Listener listener = new Listener();
            String outcome = run(s, config("Create the note", oracle("note_create", 3), "ask"), device, listener);
            check(s, outcome.contains("\"reason\":\"finished\""), "the oracle finished: " + outcome);
            check(s, phone.taskSucceeded(), "the virtual phone's checker reports the task done");
            check(s, device.performed.contains("typeText"), "the episode typed through the bridge");
            check(s, !listener.progress.isEmpty() && listener.progress.get(0).equals("1: thinking"),
                    "progress was reported: " + listener.progress);
        }
    }

    static void sensitiveActionsAskTheListener(boolean allow) {
        String s = allow ? "confirm-allow" : "confirm-decline";
        try (SimPhone phone = new SimPhone("note_delete", 5)) {
            SimDeviceBridge device = new SimDeviceBridge(phone);
            Listener listener = new Listener();
            listener.allow = allow;
            String outcome = run(s, config("Delete the note", oracle("note_delete", 5), "ask"), device, listener);
            boolean allDeletes = listener.confirmations.stream().allMatch(c -> c.startsWith("delete | Delete |"));
            // Allowed, the oracle taps Delete in the menu and again in the
            // confirmation dialog; declined, the first refusal ends it.
            check(s, allDeletes && listener.confirmations.size() == (allow ? 2 : 1),
                    "the gate asked about each Delete tap: " + listener.confirmations);
            if (allow) {
                check(s, phone.taskSucceeded(), "allowed: the note is deleted");
            } else {
                check(s, !phone.taskSucceeded(), "declined: the note is still there");
                check(s, outcome.contains("\"reason\":\"sensitive_action\"") && outcome.contains("declined"),
                        "declined: the episode stopped on the sensitive action");
            }
        }
    }

    static void unicodeCrossesTheBoundaryBothWays() throws Exception {
        String s = "unicode";
        String goal = "Schreib \"Grüße\" 👋 — 日本語";
        String text = "Grüße 👋 日本語 \\ \"quoted\"";
        String answer = "<blink>```json\n[]\n```</blink>\n<think></think>\n<link>```json\n"
                + "[{\"Plan\": \"Type it.\", \"Action\": {\"function\": \"Type\", \"text\": "
                + Json.quote(text) + "}}]\n```</link>";
        String finish = "<blink>```json\n[]\n```</blink>\n<think></think>\n<link>```json\n"
                + "[{\"Plan\": \"Done.\", \"Action\": {\"function\": \"Finish\"}}]\n```</link>";
        String policy = "{\"kind\": \"scripted\", \"answers\": [" + Json.quote(answer) + ", " + Json.quote(finish)
                + "]}";
        try (SimPhone phone = new SimPhone("", 0)) {
            SimDeviceBridge device = new SimDeviceBridge(phone);
            Listener listener = new Listener();
            listener.throwOnProgress = true;
            String outcome = run(s, config(goal, policy, "ask"), device, listener);
            check(s, outcome.contains("\"reason\":\"finished\""), "a throwing progress listener does not stop it");
            check(s, device.typed.equals(List.of(text)), "Rust -> Java: the typed text arrived intact: " + device.typed);
            String episode = new String(Files.readAllBytes(new File(dir(s), "episode.json").toPath()),
                    StandardCharsets.UTF_8);
            check(s, episode.contains(Json.quote(goal)),
                    "Java -> Rust: the goal is recorded intact in episode.json");
        }
    }

    static void cancelStopsARunningEpisode() throws Exception {
        String s = "cancel";
        try (SimPhone phone = new SimPhone("note_create", 4)) {
            SimDeviceBridge device = new SimDeviceBridge(phone);
            Listener listener = new Listener();
            CountDownLatch reached = new CountDownLatch(1);
            CountDownLatch cancelled = new CountDownLatch(1);
            listener.hook = (step, message) -> {
                if (step == 3 && reached.getCount() > 0) {
                    reached.countDown();
                    try {
                        cancelled.await(60, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            };
            NativeAgent agent = NativeAgent.create(config("Create the note", oracle("note_create", 4), "ask"),
                    dir(s), device, listener);
            String[] outcome = new String[1];
            Thread worker = new Thread(() -> outcome[0] = agent.run(), "episode");
            worker.start();
            check(s, reached.await(60, TimeUnit.SECONDS), "the episode reached step 3");
            agent.cancel();
            // close() while running defers the free until run() returns.
            agent.close();
            cancelled.countDown();
            worker.join(60_000);
            check(s, !worker.isAlive() && outcome[0] != null, "run() returned after the stop");
            System.out.println("RESULT " + s + " " + outcome[0]);
            check(s, outcome[0].contains("\"reason\":\"cancelled\""), "the stop reason says the user stopped it");
            check(s, device.performed.size() == 2, "nothing ran after the stop: " + device.performed);
            agent.close();
            check(s, !phone.taskSucceeded(), "the task was left unfinished");
        }
    }

    static void javaExceptionsEndTheEpisodeCleanly() {
        String s = "device-exception";
        try (SimPhone phone = new SimPhone("wifi_on", 0)) {
            SimDeviceBridge device = new SimDeviceBridge(phone);
            device.failOn = "tap";
            String outcome = run(s, config("Turn on Wi-Fi", oracle("wifi_on", 0), "ask"), device, new Listener());
            check(s, outcome.contains("\"reason\":\"device_failed\"")
                    && outcome.contains("java.lang.IllegalStateException: injected failure of tap"),
                    "the Java exception became the stop reason: " + outcome);
        }
    }

    static String resumeRequest(String policy) {
        return "{\"policy\": " + policy + "}";
    }

    static void resumeGoesOnAfterADeviceFailure() {
        String s = "resume";
        try (SimPhone phone = new SimPhone("note_create", 6)) {
            SimDeviceBridge device = new SimDeviceBridge(phone);
            device.failOn = "typeText";
            String first;
            try (NativeAgent agent = NativeAgent.create(config("Create the note", oracle("note_create", 6), "ask"),
                    dir(s), device, new Listener())) {
                first = agent.run();
            }
            check(s, first.contains("\"reason\":\"device_failed\"") && !phone.taskSucceeded(),
                    "the first run stopped when typing failed: " + first);
            int before = device.performed.size();
            // The accessibility service is back: the same episode goes on.
            device.failOn = "";
            Listener listener = new Listener();
            String outcome;
            try (NativeAgent agent = NativeAgent.resume(resumeRequest(oracle("note_create", 6)), dir(s), device,
                    listener)) {
                outcome = agent.run();
            }
            System.out.println("RESULT " + s + " " + outcome);
            check(s, outcome.contains("\"reason\":\"finished\"") && phone.taskSucceeded(),
                    "the resumed episode finished the task: " + outcome);
            check(s, device.performed.subList(before, device.performed.size()).contains("typeText"),
                    "the resumed run typed: " + device.performed);
            int recorded = before + 1;
            check(s, !listener.progress.isEmpty()
                    && listener.progress.get(0).equals((recorded + 1) + ": thinking"),
                    "progress counts on from the " + recorded + " recorded steps: " + listener.progress);
        }
    }

    static void misuseBecomesJavaExceptions() {
        String s = "misuse";
        try (SimPhone phone = new SimPhone("", 0)) {
            SimDeviceBridge device = new SimDeviceBridge(phone);
            String scripted = "{\"kind\": \"scripted\", \"answers\": []}";
            expect(s, "unknown field", () -> NativeAgent.create(
                    "{\"agent\": {\"goal\": \"x\", \"max_pixel\": 5}, \"policy\": " + scripted + "}",
                    dir("misuse-1"), device, new Listener()));
            expect(s, "needs a device and a listener", () -> NativeAgent.create(
                    config("x", scripted, "ask"), dir("misuse-2"), null, new Listener()));
            expect(s, "no task named 'no_such_task'", () -> NativeAgent.create(
                    config("x", oracle("no_such_task", 0), "ask"), dir("misuse-3"), device, new Listener()));
            expect(s, "already holds an episode", () -> NativeAgent.create(
                    config("x", scripted, "ask"), dir("oracle"), device, new Listener()));
            expect(s, "Rust panic", () -> SimPhone.nativePanic("boom 42"));
            expect(s, "already ended", () -> NativeAgent.resume(resumeRequest(oracle("note_create", 3)),
                    dir("oracle"), device, new Listener()));
            // Refused before anything is written: the trajectory still reads
            // back with its device failure (checked by the Rust side).
            expect(s, "resume it with the policy that recorded it", () -> NativeAgent.resume(
                    resumeRequest(scripted), dir("device-exception"), device, new Listener()));
            expect(s, "unknown field `agent`", () -> NativeAgent.resume(config("x", scripted, "ask"),
                    dir("device-exception"), device, new Listener()));
            expect(s, "NativeAgent.resume needs a device and a listener", () -> NativeAgent.resume(
                    resumeRequest(scripted), dir("device-exception"), device, null));
            try (NativeAgent agent = NativeAgent.create(config("x", scripted, "ask"), dir("misuse-4"), device,
                    new Listener())) {
                String outcome = agent.run();
                System.out.println("RESULT misuse-4 " + outcome);
                check(s, outcome.contains("\"reason\":\"policy_failed\""), "an empty script stops the episode");
                try {
                    agent.run();
                    check(s, false, "a second run() must throw");
                } catch (IllegalStateException e) {
                    check(s, true, "a second run() throws IllegalStateException");
                }
            }
        }
    }

    static void expect(String s, String needle, Runnable call) {
        try {
            call.run();
            check(s, false, "expected an AgentException containing '" + needle + "'");
        } catch (AgentException e) {
            check(s, e.getMessage().contains(needle), "AgentException: " + e.getMessage());
        }
    }
}
