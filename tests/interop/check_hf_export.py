#!/usr/bin/env python3
"""tst_export_hf's Hugging Face side: loads an exported folder with transformers' Auto classes
and writes what they compute, for the C++ test to compare with the client's own numbers.

  check_hf_export.py MODEL_DIR WORK_DIR

WORK_DIR holds (from the test): prompts.json {"prompts": [text, ...], "texts": {name: file}},
random.bin (bytes, decoded here as UTF-8 with replacement). Written to WORK_DIR:
  random-decoded.txt   the decoded random bytes, as UTF-8 (the C++ side encodes the same string)
  token_ids.json       {name: [ids]} from AutoTokenizer, for every text and "random"
  logits.safetensors   "prompt.<i>": [T, vocab] float32 logits of prompt i
  greedy.json          [[20 ids] per prompt] from model.generate (greedy)
No network: HF_HUB_OFFLINE is set and the folder is local."""
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402


def main():
    model_dir, work = sys.argv[1], sys.argv[2]
    print(f"torch {torch.__version__}, transformers {transformers.__version__}", file=sys.stderr)
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    spec = json.load(open(os.path.join(work, "prompts.json"), encoding="utf-8"))

    decoded = open(os.path.join(work, "random.bin"), "rb").read().decode("utf-8", errors="replace")
    with open(os.path.join(work, "random-decoded.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(decoded)
    texts = {name: open(path, encoding="utf-8", newline="").read() for name, path in spec["texts"].items()}
    texts["random"] = decoded
    ids = {name: tok(text, add_special_tokens=False)["input_ids"] for name, text in texts.items()}
    json.dump(ids, open(os.path.join(work, "token_ids.json"), "w"))

    logits, greedy = {}, []
    with torch.no_grad():
        for i, prompt in enumerate(spec["prompts"]):
            input_ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
            logits[f"prompt.{i}"] = model(input_ids).logits[0].contiguous()
            out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=20,
                                 min_new_tokens=20, do_sample=False, pad_token_id=0)
            greedy.append(out[0, input_ids.shape[1]:].tolist())
    save_file(logits, os.path.join(work, "logits.safetensors"))
    json.dump(greedy, open(os.path.join(work, "greedy.json"), "w"))


if __name__ == "__main__":
    main()
