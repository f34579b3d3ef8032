"""What goes in: the benchmark datasets, splits, the tokenizer and the frozen encoder."""
