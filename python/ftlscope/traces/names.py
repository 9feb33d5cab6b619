"""Names the command line needs before anything heavy (pyarrow, pandas) is imported."""

FORMATS = ("parquet", "blkparse", "msr", "alibaba", "fio", "spc")
WORKLOAD_NAMES = ("db", "search", "cloud", "video")
