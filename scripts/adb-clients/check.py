"""Third-party ADB client libraries against the virtual phone.

Called by scripts/check-adb-clients, which starts `btl sim serve` and a
private adb server connected to it. Each check calls a library's public API
the way automation does and compares the answer with what a device gives
(the screen's size, the file's checksum, the command's exit status, the
resumed activity that `dumpsys activity top` names). A check that hangs
fails after its timeout.

KNOWN_GAPS lists the checks the phone does not pass yet (what is missing is
said beside each): they are run and reported but do not fail the run, and a
known gap that passes fails it, so the list cannot go stale.

The APKs installed are tests/data/apk's, made by Android's aapt and signed
by apksigner (scripts/make-apk-fixtures); the unsigned one must be refused
as a device refuses it.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import sys
import threading
import time
from pathlib import Path

KNOWN_GAPS: dict[str, str] = {}

PACKAGE = "com.example.btlcheck"  # signed-v2.apk's, as `aapt dump badging` reads it

WIDTH, HEIGHT = 1080, 2400
TIMEOUT_S = 60


class CheckFailed(Exception):
    pass


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(what)


def run_with_timeout(fn):
    result: dict = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported per check
            result["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(TIMEOUT_S)
    if thread.is_alive():
        raise CheckFailed(f"no answer in {TIMEOUT_S} s")
    if "error" in result:
        raise result["error"]
    return result.get("value")


def focused_activity(shell) -> tuple[str, str]:
    """The resumed activity as `dumpsys activity top` prints it: (package, activity)."""
    top = shell("dumpsys activity top")
    m = re.search(r"ACTIVITY ([\w.]+)/([\w.$]+) ", top)
    expect(m is not None, f"no ACTIVITY line in dumpsys activity top: {top!r}")
    return m.group(1), m.group(2)


def png_size(data: bytes) -> tuple[int, int]:
    expect(data[:8] == b"\x89PNG\r\n\x1a\n", f"not a PNG: {data[:16]!r}")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def checks_adbutils(args, payload: Path, digest: str, apks: Path) -> list:
    import adbutils

    client = adbutils.AdbClient(host="127.0.0.1", port=args.server_port)
    d = client.device(serial=args.device)
    remote = "/data/local/tmp/adbutils.bin"

    def shell_status():
        r = d.shell2("echo out; echo err >&2; false")
        expect(r.returncode == 1, f"exit status {r.returncode}, want 1")
        expect(r.output == "out\nerr\n", f"output {r.output!r}")

    def window_size():
        size = d.window_size()
        expect((size.width, size.height) == (WIDTH, HEIGHT), f"{size}")

    def app_current():
        package, _ = focused_activity(d.shell)
        app = d.app_current()
        expect(app.package == package, f"{app} vs {package}")

    def screenshot():
        expect(d.screenshot().size == (WIDTH, HEIGHT), "size")

    def framebuffer():
        image = d.framebuffer()
        expect(image.size == (WIDTH, HEIGHT), f"size {image.size}")
        shot = d.screenshot().convert("RGB")
        for x, y in [(10, 10), (540, 1200), (1000, 2300)]:
            expect(image.convert("RGB").getpixel((x, y)) == shot.getpixel((x, y)),
                   f"pixel ({x}, {y}) differs from screencap's")

    def push_pull():
        d.sync.push(str(payload), remote)
        expect(d.sync.stat(remote).size == payload.stat().st_size, "stat size")
        expect(hashlib.md5(d.sync.read_bytes(remote)).hexdigest() == digest, "pulled checksum")
        expect(d.shell(f"md5sum {remote}").split()[0] == digest, "md5sum on the phone")
        expect(any(f.path == "adbutils.bin" for f in d.sync.list("/data/local/tmp")), "listing")

    def install():
        d.install(str(apks / "signed-v2.apk"), nolaunch=True, silent=True)
        expect(PACKAGE in d.list_packages(), "listed after install")
        path = d.shell(["pm", "path", PACKAGE]).strip()
        expect(re.fullmatch(rf"package:/data/app/~~[\w-]+==/{PACKAGE}-[\w-]+==/base\.apk", path),
               path)
        expect(hashlib.md5(d.sync.read_bytes(path[len("package:"):])).hexdigest()
               == hashlib.md5((apks / "signed-v2.apk").read_bytes()).hexdigest(), "pulled APK")
        expect(d.uninstall(PACKAGE).strip() == "Success", "uninstall")
        expect(PACKAGE not in d.list_packages(), "listed after uninstall")

    def install_unsigned():
        try:
            d.install(str(apks / "unsigned.apk"), nolaunch=True, silent=True)
        except adbutils.AdbInstallError as e:
            expect("INSTALL_PARSE_FAILED_NO_CERTIFICATES" in str(e), str(e))
        else:
            raise CheckFailed("an unsigned APK was installed")

    def rotation():
        try:
            d.shell("settings put system accelerometer_rotation 0; "
                    "settings put system user_rotation 1")
            expect(d.rotation() == 1, f"rotation {d.rotation()}")
            size = d.window_size()
            expect((size.width, size.height) == (HEIGHT, WIDTH), f"{size}")
            expect(d.screenshot().size == (HEIGHT, WIDTH), "landscape screenshot")
        finally:
            d.shell("settings put system user_rotation 0")

    def hierarchy():
        xml = d.dump_hierarchy()
        expect(xml.lstrip().startswith("<?xml") and "<hierarchy" in xml, xml[:80])

    def long_output():
        out = d.shell2("seq 1 200000").output
        want = "".join(f"{i}\n" for i in range(1, 200001))
        expect(len(want) > 1_000_000, "the check itself")
        expect(out == want, f"{len(out)} bytes, want {len(want)}")

    def concurrent():
        errors = []

        def worker(n: int):
            try:
                for i in range(5):
                    r = d.shell2(f"echo {n}-{i}; sh -c 'exit {i}'")
                    if (r.output, r.returncode) != (f"{n}-{i}\n", i):
                        errors.append(f"client {n}: {r.output!r} {r.returncode}")
                name = f"/data/local/tmp/c{n}.txt"
                d.sync.push(io.BytesIO(str(n).encode() * 1000), name)
                if d.sync.read_bytes(name) != str(n).encode() * 1000:
                    errors.append(f"client {n}: file")
            except Exception as e:  # noqa: BLE001
                errors.append(f"client {n}: {e}")

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        expect(not errors, "; ".join(errors))

    return [("shell with exit status", shell_status), ("window size", window_size),
            ("top activity", app_current), ("screenshot (screencap)", screenshot),
            ("screenshot (framebuffer)", framebuffer), ("push/pull 5 MB", push_pull),
            ("install", install),
            ("install (unsigned, refused)", install_unsigned), ("rotation", rotation),
            ("uiautomator dump", hierarchy), ("1.3 MB output", long_output),
            ("4 concurrent clients", concurrent)]


def checks_ppadb(args, payload: Path, digest: str, apks: Path) -> list:
    from ppadb.client import Client

    d = Client(host="127.0.0.1", port=args.server_port).device(args.device)
    remote = "/data/local/tmp/ppadb.bin"

    def shell():
        expect(d.shell("echo hi; echo X:$?") == "hi\nX:0\n", "output")

    def wm_size():
        size = d.wm_size()
        expect((size.width, size.height) == (WIDTH, HEIGHT), f"{size}")

    def top_activity():
        package, activity = focused_activity(d.shell)
        top = d.get_top_activity()
        expect(top is not None and (top.package, top.activity) == (package, activity), f"{top}")
        expect(str(top.pid) == d.shell(f"pidof {package}").strip(), f"pid {top.pid}")

    def screencap():
        expect(png_size(bytes(d.screencap())) == (WIDTH, HEIGHT), "size")

    def push_pull():
        d.push(str(payload), remote)
        local = args.work / "ppadb.bin"
        d.pull(remote, str(local))
        expect(hashlib.md5(local.read_bytes()).hexdigest() == digest, "pulled checksum")

    def install():
        expect(d.install(str(apks / "signed-v2.apk")) is True, "install")
        expect(d.is_installed(PACKAGE), "pm path after install")
        expect(d.uninstall(PACKAGE) is True, "uninstall")
        expect(not d.is_installed(PACKAGE), "pm path after uninstall")

    return [("shell", shell), ("window size", wm_size), ("top activity", top_activity),
            ("screenshot (screencap)", screencap), ("push/pull 5 MB", push_pull), ("install", install)]


def checks_adb_shell(args, payload: Path, digest: str, apks: Path) -> list:
    from adb_shell.adb_device import AdbDeviceTcp

    host, port = args.device.rsplit(":", 1)
    d = AdbDeviceTcp(host, int(port), default_transport_timeout_s=20.0)
    remote = "/data/local/tmp/adb_shell.bin"

    def connect():
        expect(d.connect(rsa_keys=None, auth_timeout_s=5) is True, "connect")

    def shell():
        out = d.shell("echo out; echo err >&2; echo X:$?")
        expect(out == "out\nerr\nX:0\n", f"{out!r}")

    def stat_list():
        mode, _, _ = d.stat("/sdcard")
        expect(mode & 0o170000 == 0o040000, f"/sdcard mode {mode:o}")
        names = {bytes(entry.filename) for entry in d.list("/data/local")}
        expect(b"tmp" in names, f"{names}")

    def push_pull():
        d.push(str(payload), remote)
        local = args.work / "adb_shell.bin"
        d.pull(remote, str(local))
        expect(hashlib.md5(local.read_bytes()).hexdigest() == digest, "pulled checksum")
        expect(d.stat(remote)[1] == payload.stat().st_size, "stat size")

    def dump_pull():
        out = d.shell("uiautomator dump /sdcard/window_dump.xml")
        expect("dumped to: /sdcard/window_dump.xml" in out, out)
        local = args.work / "window_dump.xml"
        d.pull("/sdcard/window_dump.xml", str(local))
        expect(b"<hierarchy" in local.read_bytes(), "pulled XML")

    def screencap():
        data = d.shell("screencap -p", decode=False)
        expect(png_size(data) == (WIDTH, HEIGHT), "size")

    return [("connect (no adb server)", connect), ("shell", shell), ("stat and list", stat_list),
            ("push/pull 5 MB", push_pull), ("uiautomator dump + pull", dump_pull),
            ("screenshot (screencap)", screencap)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-port", type=int, required=True)
    ap.add_argument("--device", required=True, help="HOST:PORT of btl sim serve")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--apks", type=Path, required=True, help="tests/data/apk")
    args = ap.parse_args()
    payload = args.work / "payload.bin"
    payload.write_bytes(os.urandom(5 * 1024 * 1024))
    digest = hashlib.md5(payload.read_bytes()).hexdigest()
    failures = 0
    for library, make in [("adbutils", checks_adbutils), ("pure-python-adb", checks_ppadb),
                          ("adb-shell", checks_adb_shell)]:
        for name, check in make(args, payload, digest, args.apks):
            key = f"{library}: {name}"
            started = time.monotonic()
            try:
                run_with_timeout(check)
                error = None
            except Exception as e:  # noqa: BLE001 - every failure is reported
                error = f"{type(e).__name__}: {e}"
            seconds = time.monotonic() - started
            gap = KNOWN_GAPS.get(key)
            if error is None and gap is None:
                status = "ok"
            elif error is None:
                status, failures = "FAIL (passes, but is listed in KNOWN_GAPS)", failures + 1
            elif gap is not None:
                status = f"known gap: {gap}"
            else:
                status, failures = f"FAIL: {error}", failures + 1
            print(f"{key:<45} {seconds:5.1f} s  {status}", flush=True)
    print(f"check-adb-clients: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
