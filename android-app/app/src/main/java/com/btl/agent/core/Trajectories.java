/*
 * Where the app keeps its trajectories: one directory per episode under
 * <files dir>/trajectories, named episode-<unix ms> like `btl run`'s, so
 * `adb pull` of that folder gives directories `btl report` reads as they are.
 */
package com.btl.agent.core;

import java.io.File;

public final class Trajectories {
    public static final String FOLDER = "trajectories";
    private static final String PREFIX = "episode-";

    private Trajectories() {
    }

    /** A directory for a new episode started at {@code nowMillis}; not created, never an existing one. */
    public static File newEpisodeDir(File root, long nowMillis) {
        File dir = new File(root, PREFIX + nowMillis);
        for (int n = 2; dir.exists(); n++) {
            dir = new File(root, PREFIX + nowMillis + "-" + n);
        }
        return dir;
    }

    /** The most recently started episode under {@code root}, or null when there is none. */
    public static File latest(File root) {
        File[] dirs = root.listFiles(f -> f.isDirectory() && startedAt(f.getName()) >= 0);
        File best = null;
        if (dirs == null) {
            return null;
        }
        for (File dir : dirs) {
            if (best == null || newer(dir.getName(), best.getName())) {
                best = dir;
            }
        }
        return best;
    }

    private static boolean newer(String a, String b) {
        long ta = startedAt(a);
        long tb = startedAt(b);
        if (ta != tb) {
            return ta > tb;
        }
        return suffix(a) > suffix(b);
    }

    /** The start time in a directory name, or -1 when it is not an episode directory. */
    static long startedAt(String name) {
        if (!name.startsWith(PREFIX)) {
            return -1;
        }
        String rest = name.substring(PREFIX.length());
        int dash = rest.indexOf('-');
        String millis = dash < 0 ? rest : rest.substring(0, dash);
        try {
            long t = Long.parseLong(millis);
            if (dash >= 0) {
                Integer.parseInt(rest.substring(dash + 1));
            }
            return t < 0 ? -1 : t;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    private static int suffix(String name) {
        String rest = name.substring(PREFIX.length());
        int dash = rest.indexOf('-');
        return dash < 0 ? 1 : Integer.parseInt(rest.substring(dash + 1));
    }
}
