"""The report's rules on hand-made records: the datasheet check, guidance that stays silent without evidence,
sentences that never state an unmeasured number, and the formatting every cited number goes through."""

from __future__ import annotations

import pytest

from ftlscope.errors import UsageError
from ftlscope.report.card import build_card, parse_spec
from ftlscope.report.facts import Facts, format_bytes, format_value
from ftlscope.report.guidance import build_guidance
from ftlscope.report.sentences import sentence


def finding(value, unit):
    return {"value": value, "unit": unit, "evidence": "test"}


def record(experiments=None, properties=None, spec=None, rotational=False):
    return {
        "target": {"name": "sim:test", "rotational": rotational},
        "experiments": [{"name": name, "findings": found, "figures": [f"experiments/{name}/fig.png"]}
                        for name, found in (experiments or {}).items()],
        "probes": None if properties is None else {"properties": properties},
        "spec": spec or {},
    }


QD_SWEEP = {"peak_iops": finding(500_000.0, "IOPS"), "peak_qd": finding(256, "QD"), "knee_qd": finding(64, "QD"),
            "practical_knee_qd": finding(32, "QD"), "sla_max_qd": finding(128, "QD")}


def test_spec_is_parsed_into_the_cards_units():
    spec = parse_spec("seq_read=3500MB/s, seq_write=3.3GB/s,random_read_iops=500k,qd1_read_latency=80us,"
                      "write_cliff=40GB,flush_window=50ms")
    assert spec["seq_read"]["value"] == pytest.approx(3500)
    assert spec["seq_write"]["value"] == pytest.approx(3300)
    assert spec["random_read_iops"]["value"] == pytest.approx(500_000)
    assert spec["qd1_read_latency"]["value"] == pytest.approx(80)
    assert spec["write_cliff"]["value"] == 40e9
    assert spec["flush_window"]["value"] == pytest.approx(0.05)
    assert parse_spec(None) == {} and parse_spec("") == {}


@pytest.mark.parametrize("text, named", [
    ("seq_reed=3500MB/s", "seq_reed=3500MB/s"),
    ("seq_read", "seq_read"),
    ("seq_read=fast", "seq_read=3500MB/s"),
    ("random_read_iops=lots", "random_read_iops=500k"),
])
def test_bad_spec_is_one_line_naming_the_item(text, named):
    with pytest.raises(UsageError) as err:
        parse_spec(text)
    assert "--spec" in err.value.message and named in err.value.message


def test_card_checks_the_datasheet_both_ways_with_a_tolerance():
    experiments = {"qd-sweep": QD_SWEEP, "qd1-baseline": {"random_read_lat_mean_us": finding(85.0, "us")}}
    spec = parse_spec("random_read_iops=540k,qd1_read_latency=70us")
    card = {row["key"]: row for row in build_card(record(experiments, spec=spec))}
    assert card["random_read_iops"]["meets_spec"] is True  # 500k is within 10 % of 540k
    assert card["random_read_iops"]["detail"] == "at QD 256"
    assert card["qd1_read_latency"]["meets_spec"] is False  # 85 us is more than 10 % over 70 us
    assert card["seq_read"]["value"] is None and card["seq_read"]["display"] == "not measured in this suite"


def test_card_says_why_a_figure_is_missing():
    probes = {"P8": {"value": 0, "answer": "none"}, "P10": {"value": None, "answer": "never"}}
    card = {row["key"]: row for row in build_card(record({"seq-write-over-time": {}}, probes))}
    assert card["write_cliff"]["display"] == "none found in the bytes written"
    assert card["flush_window"]["display"] == "none (write-through)"  # no buffer: nothing to flush
    buffered = {"P8": {"value": 2**20, "answer": "1 MiB"}, "P10": {"value": None, "answer": "never"}}
    card = {row["key"]: row for row in build_card(record({"seq-write-over-time": {}}, buffered))}
    assert card["flush_window"]["display"] == "does not flush when idle"
    # A hard disk's card shows what a disk's datasheet gives, not flash internals or a "write cliff".
    hdd = {row["key"]: row for row in build_card(record(rotational=True))}
    assert {"access_time", "outer_seq_read", "inner_seq_read", "random_read_iops_qd1", "random_read_iops_qd32",
            "random_write_iops", "write_cache"} <= set(hdd)
    assert not {"page_size", "write_cliff", "write_buffer", "flush_window", "seq_write"} & set(hdd)
    assert hdd["access_time"]["display"] == "not measured in this suite"
    # No write buffer (P8 none): the flush window is not "0 ms" but write-through.
    through = {row["key"]: row for row in build_card(record(properties={"P8": {"value": 0, "answer": "none"},
                                                                          "P10": {"value": 0.0, "answer": "0 s"}}))}
    assert through["flush_window"]["display"] == "none (write-through)"


def test_a_missed_spec_says_by_how_much_in_the_cards_units():
    experiments = {"bs-sweep": {"sequential_peak_mb_s": finding(1650.0, "MB/s")},
                   "qd1-baseline": {"random_read_lat_mean_us": finding(85.0, "us")}}
    card = {row["key"]: row for row in build_card(record(experiments, spec=parse_spec(
        "seq_read=2GB/s,qd1_read_latency=0.07ms")))}
    assert card["seq_read"]["verdict"] == "✗ 1,650 MB/s, 17.5 % below 2,000 MB/s"
    assert card["qd1_read_latency"]["verdict"] == "✗ 85 µs, 21.4 % above 70 µs"
    assert card["seq_read"]["spec_display"] == "2,000 MB/s"


def test_guidance_is_silent_without_evidence():
    assert build_guidance(record()) == []
    # A rule needs all its evidence: the practical knee alone gives no queue-depth advice.
    assert build_guidance(record({"qd-sweep": {"practical_knee_qd": finding(32, "QD")}})) == []


def test_guidance_cites_what_it_says():
    advice = {a["rule"]: a for a in build_guidance(record({"qd-sweep": QD_SWEEP}))}
    throughput = advice["queue-depth-throughput"]
    assert "QD 32" in throughput["text"] and "500,000 IOPS" in throughput["text"]
    assert "rule: 90 % of peak IOPS" in throughput["text"] and "knee at QD 64" in throughput["text"]
    assert {(e["finding"], e["value"]) for e in throughput["evidence"]} == {
        ("practical_knee_qd", 32), ("peak_iops", 500_000.0), ("peak_qd", 256), ("knee_qd", 64)}
    assert all(e["figure"] == "experiments/qd-sweep/fig.png" for e in throughput["evidence"])
    # No latency line without the latency rule's findings: a throughput figure is not a latency limit.
    assert "queue-depth-latency" not in advice


def latency_sweep(params=None, **extra):
    found = {**QD_SWEEP, "qd1_p99_us": finding(80.0, "us"), "latency_limit_qd": finding(8, "QD"),
             "latency_limit_p99_us": finding(150.0, "us"), "sla_p99_us": finding(1000.0, "us"),
             "sla_max_qd_p99_us": finding(950.0, "us"), **extra}
    rec = record({"qd-sweep": found})
    rec["experiments"][0]["params"] = {"latency_factor": 2.0, "sla_p99": 10**6, "moderate_qd": 16, **(params or {})}
    return rec


def test_latency_sensitive_work_gets_a_latency_rule():
    latency = {a["rule"]: a for a in build_guidance(latency_sweep())}["queue-depth-latency"]
    assert "keep at most QD 8" in latency["text"] and "150 µs" in latency["text"] and "80 µs" in latency["text"]
    assert "(rule: p99 within 2x QD 1's" in latency["text"]
    # With the user's p99 target the line follows it instead, and says so.
    rec = latency_sweep({"sla_p99": 500_000}, sla_p99_us=finding(500.0, "us"), sla_max_qd=finding(4, "QD"),
                        sla_max_qd_p99_us=finding(420.0, "us"))
    latency = {a["rule"]: a for a in build_guidance(rec)}["queue-depth-latency"]
    assert "keep at most QD 4" in latency["text"] and "500 µs" in latency["text"] and "--sla-p99" in latency["text"]
    rec = latency_sweep({"sla_p99": 50_000}, sla_p99_us=finding(50.0, "us"), sla_max_qd=finding(None, "QD"))
    latency = {a["rule"]: a for a in build_guidance(rec)}["queue-depth-latency"]
    assert "no queue depth measured meets" in latency["text"]


def test_p99_growth_is_said_only_against_a_shallower_queue_and_when_it_grew():
    shallow_knee = latency_sweep(knee_qd=finding(2, "QD"), p99_growth=finding(0.167, "ratio"))
    text = {a["rule"]: a for a in build_guidance(shallow_knee)}["queue-depth-throughput"]["text"]
    assert "p99" not in text and "0.17x" not in text
    deep = latency_sweep(p99_growth=finding(8.23, "ratio"))
    text = {a["rule"]: a for a in build_guidance(deep)}["queue-depth-throughput"]["text"]
    assert "At the knee p99 is 8.23x the p99 at QD 16" in text
    flat = latency_sweep(p99_growth=finding(1.0, "ratio"))
    assert "the p99 at QD 16" not in {a["rule"]: a for a in build_guidance(flat)}["queue-depth-throughput"]["text"]


def test_write_rate_follows_newt_and_compares_with_the_write_speed():
    probes = {"P8": {"value": 12 * 2**20, "answer": "12 MiB"}, "P10": {"value": 0.2, "answer": "0.2 s"}}
    slow_writes = {"seq-write-over-time": {"throughput_before_mb_s": finding(1000.0, "MB/s")}}
    advice = {a["rule"]: a for a in build_guidance(record(slow_writes, probes))}
    assert "about 62.9 MB/s" in advice["write-rate"]["text"]  # 12 MiB / 0.2 s (seed 003: 11.5 MB / 200 ms)
    assert "Writing below that rate" in advice["write-rate"]["text"]
    # Drain rate above the write rate, but the writes' own latency shows waiting: no "no rate limit".
    waiting = {"seq-write-over-time": {"throughput_before_mb_s": finding(40.0, "MB/s"),
                                       "window_lat_p50_us": finding(2400.0, "us"),
                                       "window_lat_p99_us": finding(33000.0, "us")}}
    text = {a["rule"]: a for a in build_guidance(record(waiting, probes))}["write-rate"]["text"]
    assert "no rate limit is needed" not in text and "already wait" in text and "33 ms" in text
    # Regression: writes slower than the drain rate that wait all the same were told to pace below that rate (a
    # profile of the default simulated SSD: 1,160 MB/s writes against a 1,617 MB/s drain). Idle time drains it.
    assert "below the full write rate" not in text and "pause 200 ms after every 12 MiB" in text
    assert "never leaves it" in text
    fast = {"seq-write-over-time": {**waiting["seq-write-over-time"], "throughput_before_mb_s": finding(100.0, "MB/s")}}
    text = {a["rule"]: a for a in build_guidance(record(fast, probes))}["write-rate"]["text"]
    assert "already wait" in text and "Pace latency-critical writes below the full write rate" in text
    calm = {"seq-write-over-time": {**waiting["seq-write-over-time"], "window_lat_p99_us": finding(3000.0, "us")}}
    text = {a["rule"]: a for a in build_guidance(record(calm, probes))}["write-rate"]["text"]
    assert "no rate limit is needed" in text and "3 ms" in text
    never = {"P8": {"value": 12 * 2**20, "answer": "12 MiB"}, "P10": {"value": None, "answer": "never"}}
    text = build_guidance(record(properties=never))[0]["text"]
    assert "does not drain in idle" in text


def test_read_sizes_to_avoid_come_from_p6():
    probes = {"P6": {"value": {"consistent": False, "penalised_sizes": [[17408, 20480]]},
                     "answer": "inconsistent (17 KiB-20 KiB)"}}
    advice = build_guidance(record(properties=probes))
    assert advice[0]["rule"] == "read-sizes" and "17 KiB-20 KiB" in advice[0]["text"]


def test_sentence_uses_the_first_template_whose_findings_exist():
    facts = Facts(record({"qd-sweep": {k: v for k, v in QD_SWEEP.items() if k != "knee_qd"}}))
    text = sentence(facts, "qd-sweep")
    assert "no knee" in text and "500,000 IOPS" in text and "QD 256" in text
    assert sentence(facts, "bs-sweep") is None
    unknown = Facts(record({"custom": {"speed": finding(3.5, "MB/s")}}))
    assert sentence(unknown, "custom") == "speed: 3.5 MB/s."


def test_formatting():
    assert format_bytes(16384) == "16 KiB"
    assert format_bytes(13016760320.0) == "13 GB"
    assert format_value(67.39, "us") == "67.4 µs"
    assert format_value(2398.2, "us") == "2.4 ms"
    assert format_value(0.032, "s") == "32 ms"
    assert format_value(1500.37, "ratio") == "1,500x"
    assert format_value(0.849, "ratio") == "0.85x"
    assert format_value(1.0, "ratio") == "1.00x"
    assert format_value(2.68e-05, "%") == "< 0.1 %"
    assert format_value(0.0004, "share") == "< 0.1 %"
    assert format_value(1.5e6, "us") == "1.5 s"
    assert format_value(True, "bool") == "True"


def test_docs_list_every_rule_and_suite_step():
    from pathlib import Path

    from ftlscope.profile.suites import get_suite
    from ftlscope.report.guidance import RULES

    docs = (Path(__file__).parent.parent / "docs" / "profile.md").read_text()
    for rule in RULES:
        advice_id = rule.__name__.replace("_", "-")
        named = {"write-sequentially": "write-order", "zeroes-and-trim": "zeroes-trim"}.get(advice_id, advice_id)
        assert f"`{named}`" in docs, named
    for suite in ("quick", "standard"):
        for step in get_suite(suite).steps:
            assert step.experiment in docs, step.experiment


def test_write_order_and_zeroes_rules_read_the_whole_drive_experiments():
    experiments = {
        "random-fill": {"write_amplification": finding(7.56, "ratio"), "slowdown_ratio": finding(1.73, "ratio")},
        "data-dependence": {"write_zeroes_vs_zeros_full": finding(0.5, "ratio")},
        "trim-before-overwrite": {"overwrite_speedup": finding(2.65, "ratio"),
                                  "write_amplification_overwrite": finding(6.71, "ratio"),
                                  "write_amplification_trim_first": finding(3.08, "ratio")},
    }
    advice = {a["rule"]: a["text"] for a in build_guidance(record(experiments))}
    assert advice["write-order"].startswith("Write sequentially") and "7.56x" in advice["write-order"]
    assert "Write Zeroes is slower than writing zeroes (0.50x the MB/s)" in advice["zeroes-trim"]
    assert "fell from 6.71x to 3.08x" in advice["zeroes-trim"]
    calm = {"random-fill": {"write_amplification": finding(1.02, "ratio"), "slowdown_ratio": finding(1.0, "ratio")}}
    assert build_guidance(record(calm))[0]["text"].startswith("The write order matters little")


def test_a_sentence_holds_only_for_the_values_it_fits():
    costly = {"aligned_from_bytes": finding(4096, "B"), "misaligned_penalty_pct": finding(8.6, "%"),
              "worst_penalty_pct": finding(11.1, "%")}
    free = {**costly, "aligned_from_bytes": finding(512, "B"), "misaligned_penalty_pct": finding(0.0, "%"),
            "worst_penalty_pct": finding(0.5, "%")}
    assert sentence(Facts(record({"alignment": costly})), "alignment").startswith("Offsets aligned to 4 KiB")
    assert sentence(Facts(record({"alignment": free})), "alignment").startswith("No misaligned offset costs")


@pytest.mark.parametrize("worst, shown", [(-0.05, "faster, by less than 0.1 %"), (-2.5, "faster, by 2.5 %"),
                                          (0.0, "the worst cost 0 %")])
def test_alignment_says_a_gain_as_a_gain_not_as_a_negative_cost(worst, shown):
    # Regression: a hard disk's alignment line read "(the worst differed by > -0.1 %)".
    found = {"worst_penalty_pct": finding(worst, "%")}
    advice = {a["rule"]: a for a in build_guidance(record({"alignment": found}))}
    text = advice["alignment"]["text"]
    assert shown in text and "> -" not in text and "-" not in text.split("(")[1]
    assert [e["finding"] for e in advice["alignment"]["evidence"]] == ["worst_penalty_pct"]
    assert advice["alignment"]["evidence"][0]["display"] in text


def test_alignment_names_the_page_without_calling_it_flash():
    # Regression: an Optane-like drive's profile advised "The flash page is 4 KiB (P1)"; its medium is no flash.
    found = {"worst_penalty_pct": finding(0.0, "%")}
    probes = {"P1": {"value": 4096, "unit": "B", "answer": "4 KiB"}}
    text = {a["rule"]: a for a in build_guidance(record({"alignment": found}, properties=probes))}["alignment"]["text"]
    assert "The drive's page is 4 KiB (P1)" in text and "flash" not in text


# ---- cost (--price / --price-per-gb) -----------------------------------------------------------------------


@pytest.mark.parametrize("text, amount, currency", [("89EUR", 89.0, "EUR"), ("89 eur", 89.0, "EUR"),
                                                    ("€89.50", 89.5, "EUR"), ("$120", 120.0, "USD"), ("45", 45.0, "")])
def test_a_price_is_read_with_its_currency(text, amount, currency):
    from ftlscope.report.cost import parse_price

    price = parse_price(text, "--price")
    assert (price["amount"], price["currency"]) == (amount, currency)


@pytest.mark.parametrize("text", ["", "cheap", "-5EUR", "0", "€89USD", "89 EURO"])
def test_a_bad_price_names_the_flag(text):
    from ftlscope.report.cost import parse_price

    with pytest.raises(UsageError) as err:
        parse_price(text, "--price")
    assert err.value.message.startswith("--price:")


def _priced(price, rotational=False, experiments=None):
    from ftlscope.report.cost import price_of

    rec = record(experiments, rotational=rotational)
    rec["target"]["size_bytes"] = 500 * 10**9
    rec["price"] = price_of(rec, *price)
    return rec


def test_the_card_gives_the_price_per_gb_per_kiops_and_per_100_mb_s():
    experiments = {"qd-sweep": QD_SWEEP, "bs-sweep": {"sequential_peak_mb_s": finding(2000.0, "MB/s")}}
    card = {row["key"]: row for row in build_card(_priced(("100EUR", None), experiments=experiments))}
    assert card["cost_per_gb"]["value"] == pytest.approx(0.2) and card["cost_per_gb"]["display"] == "0.20 EUR per GB"
    assert card["cost_per_kiops"]["value"] == pytest.approx(100 / 500)  # 500,000 IOPS peak
    assert card["cost_per_100mb_s"]["value"] == pytest.approx(100 / 20)
    assert "500,000 IOPS" in card["cost_per_kiops"]["detail"]
    # per GB: the same drive priced by the gigabyte
    per_gb = {row["key"]: row for row in build_card(_priced((None, "0.2EUR"), experiments=experiments))}
    assert per_gb["cost_per_kiops"]["value"] == pytest.approx(card["cost_per_kiops"]["value"])


def test_a_cost_without_its_measurement_stays_silent_and_a_disk_uses_its_own_rows():
    card = {row["key"]: row for row in build_card(_priced(("60USD", None)))}
    assert "cost_per_gb" in card and "cost_per_kiops" not in card and "cost_per_100mb_s" not in card
    zoning = {"random_read_iops_qd32": finding(300.0, "IOPS"), "outer_mb_s": finding(250.0, "MB/s")}
    disk = {row["key"]: row for row in build_card(_priced(("60USD", None), True, {"zoning": zoning}))}
    assert disk["cost_per_kiops"]["value"] == pytest.approx(60 / 0.3)
    assert disk["cost_per_100mb_s"]["value"] == pytest.approx(60 / 2.5)
    assert build_card(record({"qd-sweep": QD_SWEEP}))[-1]["key"] != "cost_per_gb"  # no price: no cost rows
