"""The keys benchmark runs end to end (tiny sample sizes; its timings are not judged):
both credentials answer ``echo``, and its report has both rows and the verdict."""

from __future__ import annotations

from scripts.bench import keys


async def test_the_keys_benchmark_calls_echo_with_both_credentials(capsys) -> None:
    result = await keys.run(rounds=1, per_round=250, hellos=2)
    assert {"environment token", "key", "added_pct", "target_met"} <= set(result)
    assert result["key"]["p50_us"] > 0 and result["environment token"]["p50_us"] > 0
    keys.report(result)
    out = capsys.readouterr().out
    assert "| environment token |" in out and "| key |" in out and "target ≤ 5%" in out
