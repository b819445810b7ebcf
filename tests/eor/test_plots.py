import numpy as np

from eor import oracle_upper_bound, plot_boxplot, plot_heatmap, rwr_matrix


def test_heatmap_and_boxplot_write_pngs(tmp_path):
    correct = np.random.default_rng(0).random((4, 30)) < 0.5
    heatmap = plot_heatmap(rwr_matrix(correct), ["A", "B", "C", "D"], tmp_path / "figs" / "rwr.png", "RWR")
    groups = {str(k): v for k, v in oracle_upper_bound(correct).items()}
    boxplot = plot_boxplot(groups, tmp_path / "bound.png", ylabel="accuracy", reference=correct.mean(1).max())
    for path in (heatmap, boxplot):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
