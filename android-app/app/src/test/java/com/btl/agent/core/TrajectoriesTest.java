/*
 * Episode directories: naming, never reusing one, and finding the latest.
 */
package com.btl.agent.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

public class TrajectoriesTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    @Test
    public void newDirectoriesNeverReuseAnExistingOne() throws IOException {
        File root = tmp.getRoot();
        File first = Trajectories.newEpisodeDir(root, 1700000000123L);
        assertEquals("episode-1700000000123", first.getName());
        assertTrue(first.mkdir());
        File second = Trajectories.newEpisodeDir(root, 1700000000123L);
        assertEquals("episode-1700000000123-2", second.getName());
        assertTrue(second.mkdir());
        assertEquals("episode-1700000000123-3", Trajectories.newEpisodeDir(root, 1700000000123L).getName());
    }

    @Test
    public void latestIsTheLastStartedEpisode() throws IOException {
        File root = tmp.getRoot();
        assertNull(Trajectories.latest(root));
        for (String name : new String[] {"episode-900", "episode-1000", "episode-1000-2", "episode-99",
                "episode-x", "notes"}) {
            assertTrue(new File(root, name).mkdir());
        }
        Files.write(new File(root, "episode-5000").toPath(), new byte[0]);
        assertEquals("episode-1000-2", Trajectories.latest(root).getName());
        assertNull(Trajectories.latest(new File(root, "missing")));
    }

    @Test
    public void onlyEpisodeNamesCarryAStartTime() {
        assertEquals(42L, Trajectories.startedAt("episode-42"));
        assertEquals(42L, Trajectories.startedAt("episode-42-7"));
        assertEquals(-1L, Trajectories.startedAt("episode-42-x"));
        assertEquals(-1L, Trajectories.startedAt("episode--1"));
        assertEquals(-1L, Trajectories.startedAt("run-42"));
    }
}
