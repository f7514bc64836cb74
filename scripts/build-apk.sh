#!/usr/bin/env bash
# Builds the btl Android app (debug APK) on a machine with the Android SDK and
# NDK: the native agent (android-app/native, with llama.cpp) for arm64-v8a
# and x86_64 through cargo-ndk, then the app through Gradle's assembleDebug.
#
#   ANDROID_HOME=~/Android/Sdk ANDROID_NDK_HOME=~/Android/Sdk/ndk/27.1.12297006 scripts/build-apk.sh
#
# Needs: rustup, cargo-ndk (`cargo install cargo-ndk`), cmake (llama.cpp), a
# JDK 17, and Gradle 8.7+ (or a wrapper made once with `gradle wrapper` in
# android-app/). Set BTL_VULKAN=1 to build llama.cpp with its Vulkan backend
# (needs the NDK's Vulkan headers and glslc). Prints the APK path.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
    echo "scripts/build-apk.sh: $*" >&2
    exit 1
}

[ -n "${ANDROID_HOME:-${ANDROID_SDK_ROOT:-}}" ] || die "set ANDROID_HOME to the Android SDK"
ndk="${ANDROID_NDK_HOME:-${ANDROID_NDK_ROOT:-}}"
[ -n "$ndk" ] && [ -d "$ndk" ] || die "set ANDROID_NDK_HOME to an installed NDK (SDK Manager > NDK)"
export ANDROID_NDK_HOME="$ndk"
cargo ndk --version >/dev/null 2>&1 || die "cargo-ndk is missing: cargo install cargo-ndk"
command -v cmake >/dev/null 2>&1 || die "cmake is missing (llama.cpp builds with it)"

rustup target add aarch64-linux-android x86_64-linux-android

features=llama
if [ "${BTL_VULKAN:-0}" = 1 ]; then
    features=vulkan
fi
jni_libs=android-app/app/src/main/jniLibs
# API level 30 = the app's minSdk: the library may use nothing newer.
cargo ndk -t arm64-v8a -t x86_64 --platform 30 -o "$jni_libs" \
    build --release --locked -p btl-android --features "$features"

cd android-app
if [ -x ./gradlew ]; then
    ./gradlew assembleDebug
elif command -v gradle >/dev/null 2>&1; then
    gradle assembleDebug
else
    die "no Gradle: install Gradle 8.7+ or run 'gradle wrapper' in android-app/ once"
fi
apk=app/build/outputs/apk/debug/app-debug.apk
[ -f "$apk" ] || die "Gradle finished but $apk is missing"
echo "android-app/$apk"
