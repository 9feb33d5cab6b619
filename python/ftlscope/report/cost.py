"""What a drive's performance costs: the price the user gives (``--price 89EUR`` or ``--price-per-gb
0.35EUR``) per GB of capacity, per 1,000 random read IOPS and per 100 MB/s of sequential reads — the
comparison "SSD or hard disk" buyers make (Table 3.1 of "Performance comparison of SSDs and HDDs", with the
user's own prices, since prices change faster than drives)."""

from __future__ import annotations

import re
from typing import Any

from ..errors import UsageError

SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "JPY"}
_PRICE = re.compile(r"^\s*(?P<symbol>[€$£¥]?)\s*(?P<amount>\d+(?:\.\d+)?)\s*(?P<code>[A-Za-z]{3})?\s*$")

# (key, label, what the price is divided by: card row keys tried in order, the divisor's scale, unit label)
PER = (
    ("cost_per_gb", "Price per GB of capacity", (), 1e9, "GB"),
    ("cost_per_kiops", "Price per 1,000 random read IOPS", ("random_read_iops", "random_read_iops_qd32"), 1e3,
     "1,000 IOPS"),
    ("cost_per_100mb_s", "Price per 100 MB/s of sequential reads", ("seq_read", "outer_seq_read"), 100.0,
     "100 MB/s"),
)


def parse_price(text: str, flag: str) -> dict[str, Any]:
    """``89EUR``, ``89 EUR``, ``€89``, ``$120.50``, ``89`` -> {"amount", "currency", "given"}."""
    match = _PRICE.match(text or "")
    if match is None or float(match["amount"]) <= 0:
        raise UsageError(f"{flag}: '{text}' is not a price; give a positive amount with an optional currency, "
                         f"e.g. {flag} 89EUR or {flag} $120")
    code = (match["code"] or "").upper()
    symbol = SYMBOLS.get(match["symbol"] or "", "")
    if code and symbol and code != symbol:
        raise UsageError(f"{flag}: '{text}' names two currencies ({match['symbol']} and {code}); give one")
    return {"amount": float(match["amount"]), "currency": code or symbol, "given": text.strip()}


def price_of(record: dict[str, Any], price: str | None, price_per_gb: str | None) -> dict[str, Any] | None:
    """The drive's price for the record: ``--price`` as given, or ``--price-per-gb`` times its capacity."""
    if price and price_per_gb:
        raise UsageError("--price/--price-per-gb: give one of them, not both")
    if price:
        return {**parse_price(price, "--price"), "basis": "price"}
    if price_per_gb:
        per_gb = parse_price(price_per_gb, "--price-per-gb")
        size = (record.get("target") or {}).get("size_bytes")
        if not size:
            raise UsageError("--price-per-gb: the target's capacity is unknown; give --price for the whole drive")
        return {**per_gb, "amount": per_gb["amount"] * size / 1e9, "basis": "per_gb"}
    return None


def format_money(amount: float, currency: str) -> str:
    """Two decimals, three significant digits below 0.1 (never 0.00 for a price that is not 0)."""
    shown = f"{amount:,.2f}" if amount >= 0.1 else f"{amount:.3g}"
    return f"{shown} {currency}".strip()


def cost_rows(record: dict[str, Any], card: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per cost the record's price and measurements give, each citing the card row it divides by."""
    price = record.get("price")
    if not price:
        return []
    by_key = {row["key"]: row for row in card}
    size = (record.get("target") or {}).get("size_bytes")
    rows = []
    for key, label, sources, scale, per in PER:
        if not sources:
            if not size:
                continue
            divisor, cited = size / scale, f"capacity {size / 1e9:,.1f} GB"
        else:
            row = next((by_key[s] for s in sources if s in by_key and by_key[s].get("value") is not None), None)
            if row is None:
                continue
            divisor, cited = float(row["value"]) / scale, f"{row['label']}: {row['display']}"
        if divisor <= 0:
            continue
        value = price["amount"] / divisor
        rows.append({"key": key, "label": label, "value": value, "unit": f"{price['currency']}/{per}".lstrip("/"),
                     "display": f"{format_money(value, price['currency'])} per {per}",
                     "detail": f"{format_money(price['amount'], price['currency'])} / ({cited})"})
    return rows
