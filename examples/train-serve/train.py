"""train.py - a tiny CPU PyTorch model for Crater's train -> serve example.

Fits y = 2x + 1 with one linear layer and saves its weights to
$CRATER_CHECKPOINT_DIR/model.pt (the job's checkpoint.dir), which a
service with `after: [train-tiny]` then serves (CRATER_MODEL_PATH).
"""
import os
import sys

import torch


def main():
    out = os.environ.get("CRATER_CHECKPOINT_DIR") or (sys.argv[1] if len(sys.argv) > 1 else ".")
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    y = 2 * x + 1
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(500):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, "model.pt.tmp")
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, os.path.join(out, "model.pt"))  # never half a model
    print(f"train: loss {loss.item():.6f}, saved {out}/model.pt")


if __name__ == "__main__":
    main()
