"""A small training script in the shape of the PyTorch MNIST example, on tiny generated "digits".

Written the way public examples are: argparse flags, a fixed ``torch.manual_seed(1)``,
data made in memory, ``torch.save`` at the end. ``after.py`` is the same script adapted for
the audit with the README's steps ("Audit your own training script").
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

import auditor


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(8 * 3 * 3, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def make_digits(templates, n):
    """8x8 noisy images of ten templates; the label is the template's index."""
    labels = torch.randint(0, 10, (n,))
    images = templates[labels] + 1.5 * torch.randn(n, 1, 8, 8)
    return images, labels


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]\tLoss: {loss.item():.6f}")
            if args.dry_run:
                break


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(test_loader.dataset)}")
    return {"test_loss": test_loss, "accuracy": correct / len(test_loader.dataset)}


def main():
    parser = argparse.ArgumentParser(description="tiny digits example")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N", help="input batch size for training")
    parser.add_argument("--test-batch-size", type=int, default=500, metavar="N", help="input batch size for testing")
    parser.add_argument("--epochs", type=int, default=3, metavar="N", help="number of epochs to train")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR", help="learning rate")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M", help="learning rate step gamma")
    parser.add_argument("--no-cuda", action="store_true", default=False, help="disables CUDA training")
    parser.add_argument("--dry-run", action="store_true", default=False, help="quickly check a single pass")
    parser.add_argument("--log-interval", type=int, default=10, metavar="N", help="batches between log lines")
    parser.add_argument("--save-model", action="store_true", default=False, help="save the current model")
    args = parser.parse_args()
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")

    torch.manual_seed(1)
    templates = torch.randn(10, 1, 8, 8)
    train_x, train_y = make_digits(templates, 1200)
    test_x, test_y = make_digits(templates, 400)
    run = auditor.start(config=args, seed=1, experiment="tiny-digits",
                        data={"train": auditor.generated(x=train_x, y=train_y), "test": auditor.generated(x=test_x, y=test_y)})
    train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(TensorDataset(test_x, test_y), batch_size=args.test_batch_size)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    if not run.restore_weights(model):  # the audit's artifact-recovery check evaluates the registered weights
        for epoch in range(1, args.epochs + 1):
            train(args, model, device, train_loader, optimizer, epoch)
            test(model, device, test_loader)
            scheduler.step()
    run.log_metrics(test(model, device, test_loader))
    run.save_weights(model)
    run.finish()
    auditor.register_model(run, "tiny-digits")

    if args.save_model:
        torch.save(model.state_dict(), "tiny_digits.pt")


if __name__ == "__main__":
    main()
