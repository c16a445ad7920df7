"""Benchmarks (``make bench``): each module ``bench_<area>.py`` has ``run(quick: bool) -> dict``.

Results are ratios against a baseline measured in the same run, because this machine is noisy;
``benchmarks.run`` writes them to ``var/bench/results.json``.
"""
