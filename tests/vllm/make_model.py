"""Write a tiny Llama checkpoint with seeded random weights (config.json +
model.safetensors) into a directory, for end-to-end tests with real vLLM.

    .venv/bin/python tests/vllm/make_model.py OUT_DIR [CONFIG_JSON]

vLLM's load_format="dummy" fills weights with values so small that every
token gets the same probability: outputs would not depend on the KV cache, so
a test could not tell loaded KV from recomputed KV. These weights are scaled
like a trained model's (unit-variance activations), so greedy outputs and
their logprobs change with every KV byte. Same seed, same bytes.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file


def main(out, config=None):
    config = config or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "tiny-llama", "config.json")
    with open(config) as f:
        cfg = json.load(f)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    g = torch.Generator().manual_seed(1234)
    H, inter = cfg["hidden_size"], cfg["intermediate_size"]
    V, L = cfg["vocab_size"], cfg["num_hidden_layers"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", H // nh)

    def w(rows, cols, gain=1.0):
        return torch.randn(rows, cols, generator=g) * (gain / cols ** 0.5)

    t = {"model.embed_tokens.weight": torch.randn(V, H, generator=g),
         "model.norm.weight": torch.ones(H),
         "lm_head.weight": w(V, H, gain=4.0)}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = torch.ones(H)
        t[p + "post_attention_layernorm.weight"] = torch.ones(H)
        t[p + "self_attn.q_proj.weight"] = w(nh * hd, H)
        t[p + "self_attn.k_proj.weight"] = w(nkv * hd, H)
        t[p + "self_attn.v_proj.weight"] = w(nkv * hd, H)
        t[p + "self_attn.o_proj.weight"] = w(H, nh * hd)
        t[p + "mlp.gate_proj.weight"] = w(inter, H)
        t[p + "mlp.up_proj.weight"] = w(inter, H)
        t[p + "mlp.down_proj.weight"] = w(H, inter)
    save_file({k: v.float().contiguous() for k, v in t.items()},
              os.path.join(out, "model.safetensors"))


if __name__ == "__main__":
    main(*sys.argv[1:])
