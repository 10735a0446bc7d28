"""CUDA-graph timing shared by the anchor scripts (bench/README.md): capture back-to-back launches
once, then the median over trials of one replay's time per launch, in microseconds."""
import torch


def capture(launch, n_launch):
    """A CUDA graph of launch(0) .. launch(n_launch - 1)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n_launch):
            launch(i)
    return graph


def median_replay_us(graph, n_launch, trials):
    samples = []
    for _ in range(trials):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0 / n_launch)
    samples.sort()
    return samples[len(samples) // 2]
