# Provides the libtorch that host-trainer's tch bindings build and run against.
# Sourced by scripts/test; `ensure_libtorch` exports LIBTORCH (and puts its lib
# dir on LD_LIBRARY_PATH for the test binaries).
#
# tch 0.26 is made for exactly one torch release, 2.13.0. With
# LIBTORCH_USE_PYTORCH set, torch-sys takes torch from the active Python (and
# checks its version itself). Given LIBTORCH (a libtorch dir or PyPI's
# site-packages/torch), it is checked here and used. Otherwise a slim CPU install goes into a cached venv:
# PyPI's torch wheel without its dependencies, plus the two small NVIDIA
# runtime wheels libtorch_cpu.so links to (cudart, cupti). That is ~530 MB of
# download and 1.25 GB on disk instead of ~4.7 GB, and is done once per machine.
BTL_TORCH_VERSION=2.13.0
BTL_TORCH_PIP=("torch==$BTL_TORCH_VERSION" "nvidia-cuda-runtime==13.0.96" "nvidia-cuda-cupti==13.0.85")

ensure_libtorch() {
    if [ -n "${LIBTORCH_USE_PYTORCH:-}" ]; then
        return 0
    fi
    if [ -z "${LIBTORCH:-}" ]; then
        local cache=${BTL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/btl}
        local venv=$cache/libtorch-$BTL_TORCH_VERSION-venv
        local stamp="${BTL_TORCH_PIP[*]}"
        if [ "$(cat "$venv/.btl-complete" 2>/dev/null)" != "$stamp" ]; then
            echo "libtorch: installing torch $BTL_TORCH_VERSION (CPU use, no dependencies) into $venv" >&2
            rm -rf "$venv"
            mkdir -p "$cache"
            python3 -m venv "$venv"
            "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "${BTL_TORCH_PIP[@]}"
            echo "$stamp" > "$venv/.btl-complete"
        fi
        LIBTORCH=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch
        export LIBTORCH
    fi
    # Checked before cargo runs: torch-sys would compile its C++ against the
    # wrong headers and fail with compiler errors rather than a version.
    # PyPI's torch has torch/version.py; a libtorch archive has build-version.
    local found=""
    if [ -f "$LIBTORCH/version.py" ]; then
        found=$(sed -n "s/^__version__ = '\([^']*\)'.*/\1/p" "$LIBTORCH/version.py")
    elif [ -f "$LIBTORCH/build-version" ]; then
        found=$(cat "$LIBTORCH/build-version")
    fi
    case $found in
        "$BTL_TORCH_VERSION" | "$BTL_TORCH_VERSION"+*) ;;
        *)
            echo "libtorch: $LIBTORCH is torch '${found:-unknown}', host-trainer needs $BTL_TORCH_VERSION" >&2
            return 1
            ;;
    esac
    export LD_LIBRARY_PATH="$LIBTORCH/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
