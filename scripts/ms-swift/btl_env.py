"""A Python client of `btl sim env`: the virtual phone as an RL environment.

One `BtlEnvServer` runs one `btl sim env` process; each `BtlEnv` is one of
its environments (a phone playing one episode at a time). Calls are
thread-safe, and calls on different environments run at once in the
server, so a rollout worker can drive many phones from many threads.

    server = BtlEnvServer()                     # BTL_BIN, or `btl` on PATH
    env = server.env()
    first = env.reset("wifi_on", seed=3, split="train", max_pixels=50176)
    obs = first["observation"]                  # screenshot path, prompt, step
    result = env.step(answer_text)              # reward, done, observation
    result["reward"]["process"]["total"], result["reward"]["outcome"]
    server.close()

Responses are the server's JSON objects (docs/virtual-phone.md, "The RL
environment"); a refused request raises `BtlEnvError` with the server's
reason.
"""

import itertools
import json
import os
import subprocess
import threading


# The server's longest request line (agent-core's sim::env::request::MAX_LINE).
MAX_LINE = 1 << 20


class BtlEnvError(RuntimeError):
    """The server refused a request, or stopped."""


class BtlEnvServer:
    """A `btl sim env` process. `args` are passed to it (`--dir DIR`,
    `--reward-mode paper`, `--max-envs N`, ...)."""

    def __init__(self, btl=None, args=()):
        command = [btl or os.environ.get("BTL_BIN", "btl"), "sim", "env", *args]
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            encoding="utf-8",
            bufsize=1,
        )
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._ids = itertools.count()
        self._waiting = {}
        self._stopped = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        stopped = None
        try:
            for line in self._process.stdout:
                response = json.loads(line)
                with self._state_lock:
                    slot = self._waiting.pop(response.get("id"), None)
                if slot is not None:
                    slot[1].append(response)
                    slot[0].set()
        except Exception as e:  # noqa: BLE001 - every waiter must hear of it
            stopped = f"cannot read btl sim env's output: {e}"
        # Whatever ended the output, no waiter may wait forever.
        with self._state_lock:
            self._stopped = stopped or f"btl sim env exited ({self._process.wait()})"
            waiting, self._waiting = self._waiting, {}
        for event, _ in waiting.values():
            event.set()

    def request(self, op, **fields):
        """Sends one request and waits for its response."""
        request_id = next(self._ids)
        slot = (threading.Event(), [])
        with self._state_lock:
            if self._stopped:
                raise BtlEnvError(self._stopped)
            self._waiting[request_id] = slot
        line = json.dumps({"id": request_id, "op": op, **fields}) + "\n"
        # The server answers an overlong line with no id to match it by.
        if len(line.encode("utf-8")) > MAX_LINE:
            with self._state_lock:
                self._waiting.pop(request_id, None)
            raise BtlEnvError(f"the request is longer than {MAX_LINE} bytes")
        try:
            with self._write_lock:
                self._process.stdin.write(line)
                self._process.stdin.flush()
        except (OSError, ValueError) as e:
            with self._state_lock:
                self._waiting.pop(request_id, None)
            raise BtlEnvError(f"btl sim env is gone: {e}") from e
        slot[0].wait()
        if not slot[1]:
            raise BtlEnvError(self._stopped or "btl sim env stopped")
        response = slot[1][0]
        if not response.get("ok"):
            raise BtlEnvError(response.get("error", "refused"))
        return response

    def env(self, name=None):
        """An environment; the server names it at its first reset when
        `name` is None."""
        return BtlEnv(self, name)

    def close(self):
        """Ends the server and every environment."""
        if self._process.stdin and not self._process.stdin.closed:
            self._process.stdin.close()
        self._process.wait()
        self._reader.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class BtlEnv:
    """One environment of a `BtlEnvServer`."""

    def __init__(self, server, name=None):
        self.server = server
        self.name = name

    def reset(self, task, seed=0, split=None, **options):
        """Starts an episode of `task` (instance `seed` of `split`, "train",
        "heldout", "train-open" or "validation", or of the plain suite); options: profile, max_pixels,
        max_steps, image ("path" or "base64"), teacher. The response holds
        the goal and the first observation."""
        fields = {"task": task, "seed": seed, **options}
        if split is not None:
            fields["split"] = split
        if self.name is not None:
            fields["env"] = self.name
        response = self.server.request("reset", **fields)
        self.name = response["env"]
        return response

    def step(self, answer):
        """Plays `answer` (the model's whole BTL text); the response holds
        its reward, whether the episode is done (and why), and the next
        observation."""
        if self.name is None:
            raise BtlEnvError("reset the environment before stepping it")
        return self.server.request("step", env=self.name, answer=answer)

    def close(self):
        if self.name is not None:
            name, self.name = self.name, None
            # The server may hand the name to another environment now.
            self.server.request("close", env=name)
