# The random model with Qwen2.5-VL-3B's real dimensions that the speed
# benchmarks time (scripts/make-tiny-model/qwen3b_dims.py): made once, about
# 3 GB, kept in the cache; seeded, so a cached copy is the one the script
# makes, and remade when the script changes.
#
# ensure_qwen3b_dims CACHE: sets QWEN3B_MODEL (q4_0 text model) and
# QWEN3B_MMPROJ (f16 projector). Needs scripts/lib/python-venv.sh sourced.
ensure_qwen3b_dims() {
    local cache=$1 dir fixture
    dir=$cache/qwen3b-dims
    QWEN3B_MODEL=$dir/qwen25vl-3b-dims-q4_0.gguf
    QWEN3B_MMPROJ=$dir/mmproj-qwen25vl-3b-dims-f16.gguf
    if [ ! -f "$QWEN3B_MODEL" ] || [ ! -f "$QWEN3B_MMPROJ" ] ||
        [ scripts/make-tiny-model/qwen3b_dims.py -nt "$QWEN3B_MODEL" ]; then
        ensure_venv "$cache/gguf-venv" scripts/bench/requirements-gguf.txt
        fixture=$PWD/tests/data/tiny-qwen25vl
        (cd scripts/make-tiny-model && "$cache/gguf-venv/bin/python" qwen3b_dims.py \
            "$fixture/tiny-qwen25vl-f16.gguf" "$fixture/mmproj-tiny-qwen25vl-f16.gguf" "$dir")
    fi
}
