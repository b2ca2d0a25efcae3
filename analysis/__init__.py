"""Analysis of run directories: window metrics, miss decomposition, comparisons, reports."""
