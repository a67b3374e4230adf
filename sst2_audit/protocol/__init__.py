"""Room 2, protocol: the scoring protocol stated once (rules.py: prediction, accuracy, mc2), the metrics
with their statistics, corpus metrics, paired statistics, the numeric mode and drift between platforms."""
