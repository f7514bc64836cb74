# Creates (or refreshes) a Python venv from a pinned requirements file.
# Sourced by scripts that need transformers (scripts/test too, for the
# reference venv of host-trainer's bfloat16 test).
#
# ensure_venv VENV REQUIREMENTS: installs REQUIREMENTS into VENV unless VENV
# was made from a file with the same sha256 (recorded in VENV/.requirements.sha256).
ensure_venv() {
    local venv=$1 requirements=$2 hash
    hash=$(sha256sum "$requirements" | cut -d' ' -f1)
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$hash" ]; then
        echo "creating venv $venv from $requirements (once per machine; a few minutes)" >&2
        rm -rf "$venv"
        "${PYTHON:-python3}" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
        echo "$hash" > "$venv/.requirements.sha256"
    fi
}
