# Installs the Debian packages btl's builds and tests need when they are
# missing: adb (system tests), cmake and libclang-dev (llama.cpp), plus any
# package named as an argument whose command of the same name is missing
# (scripts/test adds chromium, which renders the HTML report in a test).
# Sourced by scripts/test and scripts/run-agent; needs root for apt-get.
install_system_deps() {
    local missing=""
    local extra
    for extra in "$@"; do
        command -v "$extra" >/dev/null 2>&1 || missing="$missing $extra"
    done
    command -v adb >/dev/null 2>&1 || missing="$missing adb"
    command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
    dpkg -s libclang-dev >/dev/null 2>&1 || missing="$missing libclang-dev"
    if [ -n "$missing" ]; then
        apt-get update
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y $missing
    fi
}
