#!/usr/bin/python3
"""Python reference for bench/train_throughput: the default MoE model and training step written
in plain PyTorch, to put the C++ trainer's tokens/s next to what a Python user would get.

Mirrors core/model (fused wqkv, RoPE rotate-half, RMSNorm, sort-by-expert MoE with renormalised
top-k gates, Switch load-balance loss, z-loss) and Trainer::trainStep (cross-entropy + coefs,
clip_grad_norm_, AdamW with decay on matrices only, warmup + cosine LR). Batches come from the
same prepared token shards with the same SplitMix64 sampler, and weights are drawn in the same
order from the same seed, so the losses should match the C++ run's (a cheap check that both
compute the same thing).

Run with /usr/bin/python3 (Debian's torch 1.13 lives there). Prints `name: value` lines.
"""
import argparse
import ctypes
import json
import math
import pathlib
import resource
import time


# ---- model (core/model) ----------------------------------------------------------------------

def build_model_classes(torch):
    nn, F = torch.nn, torch.nn.functional

    class RmsNorm(nn.Module):
        def __init__(self, dim, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def apply_rope(x, cos, sin):  # rotates channel pairs (i, i + h/2)
        half = x.size(-1) // 2
        x1, x2 = x.narrow(-1, 0, half), x.narrow(-1, half, half)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)

    class Attention(nn.Module):
        def __init__(self, mc):
            super().__init__()
            d = mc["d_model"]
            self.n_heads, self.head_dim = mc["n_heads"], d // mc["n_heads"]
            self.wqkv = nn.Linear(d, 3 * d, bias=False)
            self.wo = nn.Linear(d, d, bias=False)

        def forward(self, x, cos, sin, mask):
            B, T, D = x.shape
            qkv = self.wqkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = apply_rope(qkv[0], cos, sin), apply_rope(qkv[1], cos, sin), qkv[2]
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            y = torch.matmul(torch.softmax(scores + mask, -1), v)
            return self.wo(y.transpose(1, 2).reshape(B, T, D))

    class Expert(nn.Module):  # SwiGLU: w2 · (silu(w1 · x) ⊙ (w3 · x))
        def __init__(self, d, hidden):
            super().__init__()
            self.w1 = nn.Parameter(torch.empty(hidden, d))
            self.w3 = nn.Parameter(torch.empty(hidden, d))
            self.w2 = nn.Parameter(torch.empty(d, hidden))

        def forward(self, x):
            return torch.mm(F.silu(torch.mm(x, self.w1.t())) * torch.mm(x, self.w3.t()), self.w2.t())

    class MoeLayer(nn.Module):
        def __init__(self, mc):
            super().__init__()
            self.n_experts, self.top_k = mc["n_experts"], mc["top_k"]
            self.router = nn.Linear(mc["d_model"], self.n_experts, bias=False)
            self.experts = nn.ModuleList(Expert(mc["d_model"], mc["expert_hidden"]) for _ in range(self.n_experts))

        def forward(self, x, lb_weights):
            n, k = x.size(0), self.top_k
            logits = self.router(x)
            probs = torch.softmax(logits, -1)
            gates, chosen = torch.topk(probs, k, -1)
            gates = gates / gates.sum(-1, keepdim=True)
            # Sort the n·k assignments by expert: one matmul per expert over its own tokens.
            flat = chosen.reshape(-1)
            order = torch.sort(flat, stable=True).indices
            token_of = torch.div(order, k, rounding_mode="floor")
            gate_sorted = gates.reshape(-1).index_select(0, order)
            counts = torch.bincount(flat, minlength=self.n_experts)
            x_sorted = x.index_select(0, token_of)
            outputs, start = [], 0
            for e, count in enumerate(counts.tolist()):
                if count == 0:
                    continue
                outputs.append(self.experts[e](x_sorted.narrow(0, start, count)))
                start += count
            y_sorted = torch.cat(outputs, 0) * gate_sorted.unsqueeze(1)
            y = torch.zeros_like(x).index_add(0, token_of, y_sorted)
            fraction = counts.to(probs.dtype) / float(n * k)
            load_balance = self.n_experts * (lb_weights * fraction * probs.mean(0)).sum()
            z_loss = torch.logsumexp(logits, -1).pow(2).mean()
            return y, load_balance, z_loss

    class Block(nn.Module):
        def __init__(self, mc):
            super().__init__()
            self.attn_norm = RmsNorm(mc["d_model"], mc["norm_eps"])
            self.attn = Attention(mc)
            self.ffn_norm = RmsNorm(mc["d_model"], mc["norm_eps"])
            self.moe = MoeLayer(mc)

        def forward(self, x, cos, sin, mask, lb_weights):
            h = x + self.attn(self.attn_norm(x), cos, sin, mask)
            y, lb, z = self.moe(self.ffn_norm(h).reshape(-1, h.size(-1)), lb_weights)
            return h + y.view_as(h), lb, z

    class MoeTransformer(nn.Module):
        # Modules are created in the C++ order and re-initialised in named_parameters order, so the
        # same seed draws the same initial weights.
        def __init__(self, mc):
            super().__init__()
            self.n_layers = mc["n_layers"]
            self.tok_emb = nn.Embedding(mc["vocab_size"], mc["d_model"])
            self.layers = nn.ModuleList(Block(mc) for _ in range(self.n_layers))
            self.norm = RmsNorm(mc["d_model"], mc["norm_eps"])
            self.lm_head = nn.Linear(mc["d_model"], mc["vocab_size"], bias=False)
            half = mc["d_model"] // mc["n_heads"] // 2
            inv = torch.pow(mc["rope_theta"], -torch.arange(0, half, dtype=torch.float64) / half)
            angles = torch.outer(torch.arange(0, mc["seq_len"], dtype=torch.float64), inv).float()
            self.register_buffer("rope_cos", angles.cos())
            self.register_buffer("rope_sin", angles.sin())
            self.register_buffer("causal_mask", torch.full((mc["seq_len"], mc["seq_len"]), -math.inf).triu(1))
            residual_std = 0.02 / math.sqrt(2.0 * self.n_layers)
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if p.dim() < 2:
                        continue
                    residual = ".attn.wo." in name or name.endswith(".w2")
                    torch.nn.init.normal_(p, 0.0, residual_std if residual else 0.02)

        def forward(self, tokens, lb_weights):
            T = tokens.size(1)
            cos, sin = self.rope_cos[:T], self.rope_sin[:T]
            mask = self.causal_mask[:T, :T]
            x = self.tok_emb(tokens)
            load_balance, z_loss = torch.zeros(()), torch.zeros(())
            for block in self.layers:
                x, lb, z = block(x, cos, sin, mask, lb_weights)
                load_balance, z_loss = load_balance + lb, z_loss + z
            logits = self.lm_head(self.norm(x))
            return logits, load_balance / self.n_layers, z_loss / self.n_layers

    return MoeTransformer


# ---- data and schedule (core/train) ----------------------------------------------------------

MASK64 = (1 << 64) - 1


def split_mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def load_tokens(torch, run_dir):
    """All train shards in order (token_shard.h: "ESTOKEN1", u64 count, u16 LE tokens)."""
    import numpy as np
    shards = []
    for path in sorted((run_dir / "data").glob("train-*.bin")):
        raw = path.read_bytes()
        if raw[:8] != b"ESTOKEN1":
            raise SystemExit(f"{path}: not a token shard")
        count = int.from_bytes(raw[8:16], "little")
        shards.append(np.frombuffer(raw, dtype="<u2", count=count, offset=16))
    return torch.from_numpy(np.concatenate(shards).astype(np.int64))


def batch_at(torch, tokens, seed, cursor, batch, seq):
    """BatchSampler::at: window starts from a counter-based hash, inputs and shifted targets."""
    span = tokens.numel() - seq
    starts = [split_mix64(split_mix64(seed) ^ (cursor * batch + i)) % span for i in range(batch)]
    window = torch.stack([tokens[s:s + seq + 1] for s in starts])
    return window[:, :seq].contiguous(), window[:, 1:].contiguous()


def learning_rate_at(tc, step):
    """run_manifest.cpp learningRateAt: linear warmup, cosine to lr·min_lr_ratio."""
    if step < tc["warmup_steps"]:
        return tc["lr"] * (step + 1) / tc["warmup_steps"]
    min_lr = tc["lr"] * tc["min_lr_ratio"]
    if step >= tc["total_steps"]:
        return min_lr
    progress = (step - tc["warmup_steps"]) / max(1, tc["total_steps"] - tc["warmup_steps"])
    return min_lr + 0.5 * (tc["lr"] - min_lr) * (1.0 + math.cos(math.pi * progress))


def tune_malloc():
    # The same glibc settings as es::train::configureTrainingRuntime (M_MMAP_MAX = -4,
    # M_TRIM_THRESHOLD = -1): keep the big per-step buffers instead of unmapping them each step.
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-4, 0)
    libc.mallopt(-1, 1 << 30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run-dir", required=True, help="prepared run (run.json + data/*.bin)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-mallopt", action="store_true", help="keep glibc's default malloc settings")
    args = ap.parse_args()
    if not args.no_mallopt:
        tune_malloc()

    import torch  # after mallopt, like the C++ side's configureTrainingRuntime

    MoeTransformer = build_model_classes(torch)
    torch.set_num_threads(args.threads)
    run_dir = pathlib.Path(args.run_dir)
    manifest = json.loads((run_dir / "run.json").read_text())
    mc, tc, seed = manifest["model"], manifest["train"], manifest["seed"]

    torch.manual_seed(seed)
    model = MoeTransformer(mc)
    params = [p for p in model.parameters()]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": tc["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=tc["lr"], betas=(tc["beta1"], tc["beta2"]), eps=tc["eps"])
    lb_weights = torch.ones(mc["n_experts"])
    tokens = load_tokens(torch, run_dir)

    def train_step(step):
        inputs, targets = batch_at(torch, tokens, seed, step, tc["batch_size"], mc["seq_len"])
        for p in params:
            p.grad = None
        logits, lb, z = model(inputs, lb_weights)
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        loss = ce + tc["load_balance_coef"] * lb + tc["z_loss_coef"] * z
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, tc["grad_clip"])
        for group in opt.param_groups:
            group["lr"] = learning_rate_at(tc, step)
        opt.step()
        return ce.item(), lb.item(), z.item()  # the C++ trainer reads the same three scalars

    step = 0
    for _ in range(args.warmup):
        loss = train_step(step)[0]
        step += 1
    times = []
    start = time.perf_counter()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = train_step(step)[0]
        times.append(time.perf_counter() - t0)
        step += 1
    seconds = time.perf_counter() - start
    times.sort()
    n_tokens = args.steps * tc["batch_size"] * mc["seq_len"]
    print(f"tokens_per_s: {n_tokens / seconds:.1f} tok/s")
    print(f"step_ms_median: {1e3 * times[len(times) // 2]:.1f} ms")
    print(f"parameters: {sum(p.numel() for p in params)}")
    print(f"peak_rss_bytes: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024} B")
    print(f"loss_last: {loss:.4f}")
    print(f"threads: {torch.get_num_threads()}")


if __name__ == "__main__":
    main()
