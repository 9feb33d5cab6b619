"""Analysis: small functions on plain arrays and tables, one module per concern. Nothing here touches the
engine; everything here is unit-tested on synthetic data with a known answer."""
