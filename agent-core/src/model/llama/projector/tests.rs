use super::*;

/// btl-mini's projector as its file lists it (`mmproj-btl-mini-f16.gguf`:
/// 4 blocks 128 wide in 2 heads, a 512-wide MLP and merger, 14-pixel
/// patches, a 256-wide output), written out by hand.
fn btl_mini() -> Header {
    let keys = [
        ("general.name", Value::Str("btl-mini".into())),
        ("clip.projector_type", Value::Str(PROJECTOR_TYPE.into())),
        ("clip.has_vision_encoder", Value::Bool(true)),
        ("clip.use_silu", Value::Bool(true)),
        ("clip.vision.projection_dim", Value::U32(256)),
        ("clip.vision.image_size", Value::U32(560)),
        ("clip.vision.patch_size", Value::U32(14)),
        ("clip.vision.embedding_length", Value::U32(128)),
        ("clip.vision.feed_forward_length", Value::U32(512)),
        ("clip.vision.block_count", Value::U32(4)),
        ("clip.vision.attention.head_count", Value::U32(2)),
        ("clip.vision.n_wa_pattern", Value::U32(2)),
        ("clip.vision.attention.layer_norm_epsilon", Value::F32(1e-6)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut tensors = BTreeMap::new();
    let mut add = |name: String, ne: &[i64], storage: Storage| {
        let mut padded = [1; 4];
        padded[..ne.len()].copy_from_slice(ne);
        tensors.insert(
            name,
            Tensor {
                ne: padded,
                storage,
                end: 1000,
            },
        );
    };
    for i in 0..4 {
        let blk = |part: &str| format!("v.blk.{i}.{part}");
        for part in ["attn_q", "attn_k", "attn_v", "attn_out"] {
            add(blk(&format!("{part}.weight")), &[128, 128], Storage::F16);
            add(blk(&format!("{part}.bias")), &[128], Storage::F32);
        }
        add(blk("ffn_up.weight"), &[128, 512], Storage::F16);
        add(blk("ffn_gate.weight"), &[128, 512], Storage::F16);
        add(blk("ffn_down.weight"), &[512, 128], Storage::F16);
        add(blk("ffn_up.bias"), &[512], Storage::F32);
        add(blk("ffn_gate.bias"), &[512], Storage::F32);
        add(blk("ffn_down.bias"), &[128], Storage::F32);
        add(blk("ln1.weight"), &[128], Storage::F32);
        add(blk("ln2.weight"), &[128], Storage::F32);
    }
    add("v.post_ln.weight".into(), &[128], Storage::F32);
    add("mm.0.weight".into(), &[512, 512], Storage::F16);
    add("mm.0.bias".into(), &[512], Storage::F32);
    add("mm.2.weight".into(), &[512, 256], Storage::F16);
    add("mm.2.bias".into(), &[256], Storage::F32);
    add(
        "v.patch_embd.weight".into(),
        &[14, 14, 3, 128],
        Storage::F16,
    );
    add(
        "v.patch_embd.weight.1".into(),
        &[14, 14, 3, 128],
        Storage::F16,
    );
    Header {
        keys,
        tensors,
        len: 1000,
    }
}

/// `btl_mini()` changed by `edit`, as `check` words it against a
/// 256-wide text model.
fn refusal(edit: impl FnOnce(&mut Header)) -> String {
    let mut header = btl_mini();
    edit(&mut header);
    check(&header, 256).unwrap_err()
}

fn set(header: &mut Header, key: &str, value: Value) {
    header.keys.insert(key.to_owned(), value);
}

#[test]
fn btl_minis_projector_passes_and_quantized_matrices_do_too() {
    check(&btl_mini(), 256).unwrap();
    let mut quantized = btl_mini();
    for (name, tensor) in &mut quantized.tensors {
        if tensor.ne[1] > 1 && !name.starts_with("v.patch_embd") {
            tensor.storage = Storage::Quantized("q8_0".into());
        }
    }
    check(&quantized, 256).unwrap();
}

/// The values llama.cpp aborted on when a copy of btl-mini's projector was
/// patched to hold them (an assertion while the graph is built, at load or
/// at the first image), each refused naming its key.
#[test]
fn header_values_llama_cpp_asserts_on_are_refused_by_key() {
    let cases: [(&str, Value, &str); 10] = [
        (
            "clip.vision.attention.head_count",
            Value::U32(0),
            "head_count is 0",
        ),
        (
            "clip.vision.attention.head_count",
            Value::U32(3),
            "embedding_length 128 is not clip.vision.attention.head_count 3 heads of 42",
        ),
        (
            "clip.vision.block_count",
            Value::U32(0),
            "block_count is 0; btl takes 1 to 128",
        ),
        (
            "clip.vision.patch_size",
            Value::U32(13),
            "tensor v.patch_embd.weight is [14, 14, 3, 128], where clip.vision's sizes make it [13, 13, 3, 128]",
        ),
        (
            "clip.vision.projection_dim",
            Value::U32(512),
            "tensor mm.2.bias is [256], where clip.vision's sizes make it [512]",
        ),
        (
            "clip.vision.n_wa_pattern",
            Value::U32(1),
            "n_wa_pattern is 1",
        ),
        (
            "clip.vision.patch_size",
            Value::U32(57),
            "patch_size is 57; btl takes 1 to 56",
        ),
        (
            "clip.vision.spatial_merge_size",
            Value::U32(3),
            "spatial_merge_size is 3; Qwen2.5-VL merges 2 × 2",
        ),
        (
            "clip.vision.attention.head_count",
            Value::U32(64),
            "a vision head is 2 wide; its 2-D rotary",
        ),
        (
            "clip.vision.attention.layer_norm_epsilon",
            Value::F32(f32::NAN),
            "layer_norm_epsilon is NaN",
        ),
    ];
    for (key, value, says) in cases {
        let e = refusal(|h| set(h, key, value.clone()));
        assert!(e.contains(says), "{key} = {value:?}: {e}");
    }
}

/// ggml's getters assert the stored type, so a key stored as another type
/// is refused by name; a missing required key is named too.
#[test]
fn keys_of_another_type_or_missing_are_refused_by_name() {
    let e = refusal(|h| set(h, "clip.vision.block_count", Value::F32(4.0)));
    assert_eq!(
        e,
        "clip.vision.block_count is stored as a f32, where llama.cpp reads a u32"
    );
    let e = refusal(|h| set(h, "clip.use_gelu", Value::Other("u8".into())));
    assert_eq!(
        e,
        "clip.use_gelu is stored as a u8, where llama.cpp reads a bool"
    );
    let e = refusal(|h| {
        h.keys.remove("clip.vision.n_wa_pattern");
    });
    assert_eq!(e, "it has no clip.vision.n_wa_pattern");
    let e = refusal(|h| {
        set(
            h,
            "clip.projector_type",
            Value::Str("qwen2vl_merger".into()),
        )
    });
    assert!(e.contains("btl runs Qwen2.5-VL's projector"), "{e}");
    let e = refusal(|h| {
        h.keys.remove("clip.projector_type");
    });
    assert!(e.contains("no vision projector"), "{e}");
    // As llama.cpp does, the vision section's key stands in for a missing
    // or empty one.
    let mut mixed = btl_mini();
    set(&mut mixed, "clip.projector_type", Value::Str(String::new()));
    set(
        &mut mixed,
        "clip.vision.projector_type",
        Value::Str(PROJECTOR_TYPE.into()),
    );
    check(&mixed, 256).unwrap();
    let e = refusal(|h| set(h, "clip.has_audio_encoder", Value::Bool(true)));
    assert!(e.contains("audio encoder"), "{e}");
}

/// Tensors the graph uses unchecked (a missing one is a null pointer, one
/// of another shape or type an assertion), one of another architecture,
/// and data past the file's end are refused by the tensor's name.
#[test]
fn tensors_the_graph_cannot_use_are_refused_by_name() {
    let e = refusal(|h| {
        h.tensors.remove("v.blk.2.attn_k.bias");
    });
    assert_eq!(e, "it has no tensor v.blk.2.attn_k.bias");
    let e = refusal(|h| {
        let bias = h.tensors["mm.2.bias"].clone();
        h.tensors.insert("v.patch_embd.bias".into(), bias);
    });
    assert!(
        e.contains("a tensor v.patch_embd.bias, which Qwen2.5-VL's"),
        "{e}"
    );
    let e = refusal(|h| {
        let bias = h.tensors["mm.2.bias"].clone();
        h.tensors.insert("v.blk.4.ln1.weight".into(), bias);
    });
    assert!(e.contains("v.blk.4.ln1.weight"), "{e}");
    let e = refusal(|h| {
        h.tensors.get_mut("mm.2.bias").unwrap().ne[0] = 128;
    });
    assert!(e.contains("tensor mm.2.bias is [128]"), "{e}");
    let e = refusal(|h| {
        h.tensors.get_mut("v.blk.0.ln1.weight").unwrap().storage = Storage::F16;
    });
    assert_eq!(
        e,
        "tensor v.blk.0.ln1.weight is stored as f16, where llama.cpp takes f32"
    );
    let e = refusal(|h| {
        h.tensors
            .get_mut("v.blk.1.ffn_down.weight")
            .unwrap()
            .storage = Storage::Other("i32".into());
    });
    assert!(e.contains("stored as i32"), "{e}");
    let e = refusal(|h| {
        h.tensors.get_mut("v.blk.3.ffn_up.weight").unwrap().ne[1] = 256;
    });
    assert!(
        e.contains("tensor v.blk.3.ffn_down.weight is [512, 128]"),
        "{e}"
    );
    let e = refusal(|h| {
        for i in 0..4 {
            for part in ["ffn_up", "ffn_gate"] {
                let tensor = h
                    .tensors
                    .get_mut(&format!("v.blk.{i}.{part}.weight"))
                    .unwrap();
                tensor.ne[1] = 0;
            }
        }
    });
    assert!(e.contains("with a side of 0"), "{e}");
    let e = refusal(|h| set(h, "clip.vision.embedding_length", Value::U32(0)));
    assert!(e.contains("embedding_length 0 is not"), "{e}");
    let e = refusal(|h| h.len = 999);
    assert!(
        e.contains("data ends at byte 1000, past the file's 999 bytes"),
        "{e}"
    );
}

#[test]
fn a_projector_for_another_text_width_is_refused() {
    let e = check(&btl_mini(), 128).unwrap_err();
    assert!(
        e.contains("its output is 256 wide") && e.contains("embeddings are 128 wide"),
        "{e}"
    );
}
