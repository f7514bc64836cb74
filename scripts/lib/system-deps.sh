# Installs the Debian packages btl's builds and tests need when they are
# missing: always adb (system tests), cmake and libclang-dev (llama.cpp);
# optional groups named as arguments:
#   android   a JDK and junit4 (the Android app's Java checks and JNI test),
#             clang and llvm (the C part of the aarch64-linux-android check);
#   chromium  Debian's chromium (renders the HTML report in a test);
#   vulkan    llama.cpp's Vulkan backend: loader and headers, SPIR-V headers,
#             the glslc shader compiler, and Mesa's drivers (lavapipe, a
#             Vulkan device on the CPU).
# Sourced by scripts/test and scripts/run-agent; needs root for apt-get.
install_system_deps() {
    local missing=""
    command -v adb >/dev/null 2>&1 || missing="$missing adb"
    command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
    dpkg -s libclang-dev >/dev/null 2>&1 || missing="$missing libclang-dev"
    local group
    for group in "$@"; do
        case "$group" in
            android)
                command -v javac >/dev/null 2>&1 || missing="$missing default-jdk-headless"
                [ -f /usr/share/java/junit4.jar ] || missing="$missing junit4"
                command -v clang >/dev/null 2>&1 || missing="$missing clang"
                command -v llvm-ar >/dev/null 2>&1 || missing="$missing llvm"
                ;;
            chromium)
                command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
                ;;
            vulkan)
                local pkg
                for pkg in libvulkan-dev spirv-headers glslc mesa-vulkan-drivers; do
                    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
                done
                ;;
            *)
                echo "install_system_deps: unknown group '$group'" >&2
                return 1
                ;;
        esac
    done
    if [ -n "$missing" ]; then
        apt-get update
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y $missing
    fi
}
