"""Online multi-turn GRPO in ms-swift, each rollout an episode on btl's
virtual phone (`btl sim env`).

An ms-swift plugin (`--external_plugins`) for ms-swift 4.x's multi-turn
rollouts. It registers:

  multi_turns['btl_phone']   the scheduler: a rollout starts an episode of
                             the row's task (`btl_task`, `btl_seed`,
                             `btl_split` columns; `btl_profile`, default
                             btl-extended), every completion is played
                             on the phone as the agent's answer, and the next
                             screen comes back as the next user turn (its
                             screenshot inline, the prompt `btl run` would
                             send); the rollout ends when the episode does
                             (Finish, the step budget, another agent stop) or
                             at --max_turns;
  orms['btl_env_process']    the mean per-step process reward of the
                             rollout's answers (the BTL reward against the
                             oracle's answer on each screen);
  orms['btl_env_outcome']    the outcome reward: 1 when the episode ended
                             done by the task checker's verdict, else 0.

ms-swift trains on the rollout as one conversation (its multi-turn design),
while a phone sends every step as a fresh prompt; each user turn is that
prompt, action history included.

Environment:
  BTL_BIN          the btl executable (default: `btl` on PATH);
  BTL_ENV_ARGS     extra `btl sim env` arguments, e.g. "--dir runs/env"
                   (default: a new temporary directory, kept, since ms-swift
                   reads the screenshots after the rollout);
  MAX_PIXELS       the episodes' max_pixels (default 4014080);
  BTL_ENV_LOG      a JSONL file that gets one line per finished rollout
                   (task, seed, turns, rewards, why), for checks.
"""

import json
import os
import asyncio
import shlex
import sys
import tempfile
import threading
import uuid

from swift.rollout.multi_turn import MultiTurnScheduler, multi_turns

try:
    from swift.rewards import ORM, orms  # ms-swift 4.x
except ImportError:
    from swift.plugin import ORM, orms  # ms-swift 3.x

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from btl_env import BtlEnvServer  # noqa: E402

_server = None
_server_lock = threading.Lock()
_log_lock = threading.Lock()

_KEY = "btl_env_key"


def _env_server():
    """The process's one `btl sim env` server, started on first use. It
    always records under a directory that outlives the rollouts: ms-swift
    reads the screenshots again when it builds the training batch, after
    the episode is closed (without --dir the server removes them then)."""
    global _server
    with _server_lock:
        if _server is None:
            args = shlex.split(os.environ.get("BTL_ENV_ARGS", ""))
            if "--dir" not in args:
                args += ["--dir", tempfile.mkdtemp(prefix="btl-env-")]
            if "--max-envs" not in args:
                # One environment per rollout in flight; the batch decides.
                args += ["--max-envs", "65535"]
            _server = BtlEnvServer(args=args)
        return _server


def _user_content(observation):
    """The observation's user prompt with its screenshot where the prompt's
    `<image>` is, as ms-swift's inline multimodal content."""
    before, found, after = observation["prompt"]["user"].partition("<image>")
    if not found:
        raise ValueError("the prompt has no <image> for the screenshot")
    parts = [{"type": "text", "text": before}] if before else []
    parts.append({"type": "image", "image": observation["screenshot"]})
    if after:
        parts.append({"type": "text", "text": after})
    return parts


async def _close_quietly(env):
    """Closes `env` after a failure; not closing it is not the error to
    report."""
    try:
        await asyncio.to_thread(env.close)
    except Exception:
        pass


class _Rollout:
    """One rollout's episode and the rewards it has earned."""

    def __init__(self, env, row, first):
        self.env = env
        self.task = row["btl_task"]
        self.seed = first["seed"]
        self.observation = first["observation"]
        self.process = []
        self.outcome = 0.0
        self.why = None

    def infos(self):
        mean = sum(self.process) / len(self.process) if self.process else 0.0
        return {"btl_process": mean, "btl_outcome": self.outcome, "btl_why": self.why}


class BtlPhoneScheduler(MultiTurnScheduler):
    """Rollouts as episodes of `btl sim env`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._rollouts = {}

    async def on_trajectory_start(self, requests):
        max_pixels = int(os.environ.get("MAX_PIXELS", "4014080"))
        opened, started = [], []
        try:
            for request in requests:
                row = request.data_dict or {}
                if "btl_task" not in row:
                    raise ValueError("btl_phone rollouts need a btl_task column (btl_seed, btl_split, btl_profile optional)")
                env = _env_server().env()
                # Closing an environment whose reset failed or never
                # returned does nothing: the server opened no episode for
                # it, or has not told its name yet.
                opened.append(env)
                options = {"profile": row["btl_profile"]} if row.get("btl_profile") else {}
                # Off the event loop: ms-swift gathers the hooks of all rollouts.
                first = await asyncio.to_thread(
                    env.reset,
                    row["btl_task"],
                    seed=int(row.get("btl_seed") or 0),
                    split=row.get("btl_split") or None,
                    max_pixels=max_pixels,
                    **options,
                )
                key = uuid.uuid4().hex
                self._rollouts[key] = _Rollout(env, row, first)
                started.append(key)
                if first["done"]:
                    raise RuntimeError(f"the episode of {row['btl_task']} ended before its first screen: {first}")
                observation = first["observation"]
                request.messages = [
                    {"role": "system", "content": observation["prompt"]["system"]},
                    {"role": "user", "content": _user_content(observation)},
                ]
                request.data_dict = {**row, _KEY: key}
        except BaseException:
            # The batch fails as a whole: none of its episodes stays open
            # on the server, where each would hold an environment.
            for key in started:
                self._rollouts.pop(key, None)
            for env in opened:
                await _close_quietly(env)
            raise

    async def _drop(self, key):
        """Forgets a rollout that failed and closes its environment."""
        await _close_quietly(self._rollouts.pop(key).env)

    async def on_turn_end(self, infer_request, response_choice, current_turn):
        key = infer_request.data_dict[_KEY]
        rollout = self._rollouts[key]
        try:
            result = await asyncio.to_thread(rollout.env.step, response_choice.message.content or "")
            rollout.process.append(result["reward"]["process"]["total"])
            done = bool(result["done"])
            if done:
                rollout.outcome = result["reward"]["outcome"]
                rollout.why = result["why"]["reason"]
            else:
                rollout.observation = result["observation"]
        except BaseException:
            await self._drop(key)
            raise
        last = done or (self.max_turns is not None and current_turn >= self.max_turns)
        if last:
            if not done:
                rollout.why = "max_turns"
            del self._rollouts[key]
            await asyncio.to_thread(rollout.env.close)
            self._log(rollout, current_turn)
        return {"done": done, "rollout_infos": rollout.infos()}

    def step(self, infer_request, response_choice, current_turn):
        rollout = self._rollouts[infer_request.data_dict[_KEY]]
        infer_request.messages.append({"role": "user", "content": _user_content(rollout.observation)})
        return {"infer_request": infer_request}

    @staticmethod
    def _log(rollout, turns):
        path = os.environ.get("BTL_ENV_LOG")
        if not path:
            return
        line = {"task": rollout.task, "seed": rollout.seed, "turns": turns, **rollout.infos()}
        with _log_lock, open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


class BtlEnvProcess(ORM):
    """The rollout's mean process reward."""

    def __call__(self, completions, rollout_infos=None, **kwargs):
        return [float((info or {}).get("btl_process", 0.0)) for info in rollout_infos or [{}] * len(completions)]


class BtlEnvOutcome(ORM):
    """The rollout's outcome reward."""

    def __call__(self, completions, rollout_infos=None, **kwargs):
        return [float((info or {}).get("btl_outcome", 0.0)) for info in rollout_infos or [{}] * len(completions)]


multi_turns["btl_phone"] = BtlPhoneScheduler
orms["btl_env_process"] = BtlEnvProcess
orms["btl_env_outcome"] = BtlEnvOutcome
