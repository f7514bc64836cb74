//! Both config.json styles, defaults, and the errors a bad config gives.

use super::*;

/// The transformers 4.x layout of the released Qwen2.5-VL-3B-Instruct
/// config.json (flat text fields, `rope_scaling`, `in_chans`), abridged to
/// the fields that matter.
const QWEN25VL_3B_4X: &str = r#"{
  "architectures": ["Qwen2_5_VLForConditionalGeneration"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "vision_start_token_id": 151652,
  "vision_end_token_id": 151653,
  "vision_token_id": 151654,
  "image_token_id": 151655,
  "video_token_id": 151656,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 11008,
  "max_position_embeddings": 128000,
  "max_window_layers": 70,
  "model_type": "qwen2_5_vl",
  "num_attention_heads": 16,
  "num_hidden_layers": 36,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.41.2",
  "use_cache": true,
  "use_sliding_window": false,
  "vision_config": {
    "depth": 32,
    "hidden_act": "silu",
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_chans": 3,
    "out_hidden_size": 2048,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "spatial_patch_size": 14,
    "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31],
    "tokens_per_second": 2,
    "temporal_patch_size": 2
  },
  "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
  "vocab_size": 151936
}"#;

/// The same model as transformers 5.x writes it.
const QWEN25VL_3B_5X: &str = r#"{
  "architectures": ["Qwen2_5_VLForConditionalGeneration"],
  "dtype": "bfloat16",
  "image_token_id": 151655,
  "model_type": "qwen2_5_vl",
  "text_config": {
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "max_position_embeddings": 128000,
    "model_type": "qwen2_5_vl_text",
    "num_attention_heads": 16,
    "num_hidden_layers": 36,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {"mrope_section": [16, 24, 24], "rope_theta": 1000000.0, "rope_type": "default"},
    "vocab_size": 151936
  },
  "tie_word_embeddings": true,
  "transformers_version": "5.23.0",
  "video_token_id": 151656,
  "vision_config": {
    "depth": 32,
    "fullatt_block_indexes": [7, 15, 23, 31],
    "hidden_act": "silu",
    "hidden_size": 1280,
    "in_channels": 3,
    "intermediate_size": 3420,
    "model_type": "qwen2_5_vl_vision",
    "num_heads": 16,
    "out_hidden_size": 2048,
    "patch_size": 14,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "axial"},
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "tokens_per_second": 2,
    "window_size": 112
  },
  "vision_end_token_id": 151653,
  "vision_start_token_id": 151652
}"#;

fn qwen25vl_3b() -> Config {
    Config {
        text: TextConfig {
            vocab_size: 151936,
            hidden_size: 2048,
            intermediate_size: 11008,
            num_hidden_layers: 36,
            num_attention_heads: 16,
            num_key_value_heads: 2,
            rms_norm_eps: 1e-6,
            rope_theta: 1e6,
            mrope_section: vec![16, 24, 24],
            max_position_embeddings: 128000,
        },
        vision: VisionConfig {
            depth: 32,
            hidden_size: 1280,
            intermediate_size: 3420,
            num_heads: 16,
            in_channels: 3,
            patch_size: 14,
            temporal_patch_size: 2,
            spatial_merge_size: 2,
            window_size: 112,
            fullatt_block_indexes: vec![7, 15, 23, 31],
            out_hidden_size: 2048,
            rope_theta: 10000.0,
        },
        image_token_id: 151655,
        video_token_id: 151656,
        vision_start_token_id: 151652,
        vision_end_token_id: 151653,
        tie_word_embeddings: true,
    }
}

#[test]
fn transformers_4x_flat_config_resolves() {
    assert_eq!(Config::from_json(QWEN25VL_3B_4X).unwrap(), qwen25vl_3b());
}

#[test]
fn transformers_5x_nested_config_resolves_to_the_same_model() {
    assert_eq!(Config::from_json(QWEN25VL_3B_5X).unwrap(), qwen25vl_3b());
}

#[test]
fn derived_sizes() {
    let c = qwen25vl_3b();
    assert_eq!(c.text.head_dim(), 128);
    assert_eq!(c.vision.head_dim(), 80);
    assert_eq!(c.vision.patch_dim(), 3 * 2 * 14 * 14);
    // 112 px windows = 8 × 8 patches = 4 × 4 merged tokens.
    assert_eq!(c.vision.merged_window_size(), 4);
}

#[test]
fn untied_embeddings_by_default() {
    let text = QWEN25VL_3B_5X.replace("\"tie_word_embeddings\": true,", "");
    assert!(!Config::from_json(&text).unwrap().tie_word_embeddings);
}

fn error_of(text: &str) -> String {
    Config::from_json(text).unwrap_err()
}

#[test]
fn bad_configs_name_the_field() {
    let cases = [
        (
            QWEN25VL_3B_4X.replace("\"hidden_size\": 2048,", ""),
            "missing hidden_size",
        ),
        (
            QWEN25VL_3B_4X.replace("[16, 24, 24]", "[16, 24, 16]"),
            "mrope_section [16, 24, 16] must be three sizes summing to head_dim / 2 = 64",
        ),
        (
            QWEN25VL_3B_4X.replace("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"),
            "num_attention_heads 16 is not a multiple of num_key_value_heads 3",
        ),
        (
            QWEN25VL_3B_4X.replace("\"type\": \"mrope\"", "\"type\": \"yarn\""),
            "text rope type \"yarn\" is not supported",
        ),
        (
            QWEN25VL_3B_4X.replace(
                "\"hidden_act\": \"silu\",\n  \"hidden_size\"",
                "\"hidden_act\": \"gelu\",\n  \"hidden_size\"",
            ),
            "text hidden_act \"gelu\" is not supported",
        ),
        (
            QWEN25VL_3B_4X.replace("[7, 15, 23, 31]", "[7, 15, 23, 32]"),
            "vision fullatt_block_indexes has 32, outside 0..32",
        ),
        (
            QWEN25VL_3B_4X.replace("\"window_size\": 112", "\"window_size\": 100"),
            "vision window_size 100 is not a multiple of patch_size 14 × spatial_merge_size 2",
        ),
        // Sizes whose products overflow `i64`.
        (
            QWEN25VL_3B_4X
                .replace("\"patch_size\": 14", "\"patch_size\": 4294967296")
                .replace(
                    "\"spatial_merge_size\": 2",
                    "\"spatial_merge_size\": 4294967296",
                ),
            "vision in_channels 3 × temporal_patch_size 2 × patch_size 4294967296² is too large",
        ),
        (
            QWEN25VL_3B_4X.replace(
                "\"spatial_merge_size\": 2",
                "\"spatial_merge_size\": 9223372036854775807",
            ),
            "vision window_size 112 is not a multiple of patch_size 14 × spatial_merge_size 9223372036854775807",
        ),
        (
            QWEN25VL_3B_4X.replace("[16, 24, 24]", "[9223372036854775807, 1, 0]"),
            "mrope_section [9223372036854775807, 1, 0] must be three sizes",
        ),
        (
            QWEN25VL_3B_4X.replace("\"rope_theta\": 1000000.0", "\"rope_theta\": 0.0"),
            "rope_theta must be a positive finite number, got 0",
        ),
        (
            QWEN25VL_3B_4X.replace("\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": -1e-06"),
            "rms_norm_eps must be a positive finite number, got -0.000001",
        ),
        (
            QWEN25VL_3B_4X.replace("\"out_hidden_size\": 2048", "\"out_hidden_size\": 1024"),
            "vision out_hidden_size 1024 differs from the text hidden_size 2048",
        ),
        (
            QWEN25VL_3B_4X.replace("\"image_token_id\": 151655", "\"image_token_id\": 151936"),
            "image_token_id 151936 is outside the vocabulary (vocab_size 151936)",
        ),
        (
            QWEN25VL_3B_4X.replace(
                "\"model_type\": \"qwen2_5_vl\"",
                "\"model_type\": \"qwen2_vl\"",
            ),
            "model_type is \"qwen2_vl\"; host-trainer builds only \"qwen2_5_vl\"",
        ),
        (
            QWEN25VL_3B_4X.replace("\"vocab_size\": 151936", "\"vocab_size\": \"many\""),
            "unexpected content: invalid type: string \"many\", expected i64",
        ),
        (
            "{\"model_type\": \"qwen2_5_vl\"".to_owned(),
            "not valid JSON",
        ),
        ("{}".to_owned(), "missing vision_config"),
    ];
    for (text, expected) in cases {
        let error = error_of(&text);
        assert!(
            error.starts_with(expected),
            "expected {expected:?}, got {error:?}"
        );
    }
}

#[test]
fn from_dir_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let error = Config::from_dir(dir.path()).unwrap_err().to_string();
    assert!(error.contains("config.json"), "{error}");
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    let error = Config::from_dir(dir.path()).unwrap_err().to_string();
    assert!(
        error.contains("config.json") && error.contains("missing vision_config"),
        "{error}"
    );
}
