/*
 * What the native side throws when it cannot create or run an episode: a
 * bad request, a model that does not load, a broken calling contract, or an
 * internal error (a Rust panic, caught before it could reach the JVM).
 */
package com.btl.agent.core;

public final class AgentException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public AgentException(String message) {
        super(message);
    }
}
