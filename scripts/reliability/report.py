"""Render the reliability suite's figures as markdown, and paste them into the docs.

``make reliability`` leaves ``build/reliability/figures.json`` (and the rendered
``figures.md`` beside it). This turns the JSON into one table per area::

    python -m scripts.reliability.report                       # print the markdown
    python -m scripts.reliability.report --update docs/reliability.md

``--update`` replaces what lies between the ``<!-- figures:begin -->`` and
``<!-- figures:end -->`` markers, so the document always quotes a real run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "render", "update"]

BEGIN = "<!-- figures:begin -->"
END = "<!-- figures:end -->"

# The kill-after-store attack runs on each backend; its figures are named per backend.
_KILL_AFTER_STORE = [
    ("conversations", "first turns stored but never read, then SIGKILL"),
    ("threads_duplicated", "threads duplicated by the retries"),
    ("stored_answer", "retries given the stored answer"),
    ("first_thread", "retries answered on the thread first started"),
    ("provider_calls", "provider calls for the retries"),
    ("continued", "conversations continued with one first turn"),
]

# Section -> (title, [(key, label)]). Keys missing from a run are left out; keys
# not listed here are still shown, under their own names, after the listed ones.
LAYOUT: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "fuzz",
        "Protocol fuzzing",
        [
            ("frames_tried", "frames tried (all kinds)"),
            ("generated_frames", "hypothesis-generated frames"),
            ("first_frames", "first frames (handshake) tried"),
            ("corpus_frames", "hand-written nasty frames"),
            ("flood_frames", "frames in floods"),
            ("pipelined_calls", "results for calls pipelined on one connection"),
            ("pipelined_cancelled", "of which CANCELLED (cancels sent among the calls)"),
            ("error_frames", "error frames received, as documented"),
            ("closes", "connections closed, by code, as documented"),
            ("calls_answered", "valid calls answered (one result each)"),
            ("call_outcomes", "their outcomes"),
            ("replays", "calls answered from the replay cache"),
            ("bystander_calls", "bystander echo calls meanwhile"),
            ("bystander_errors", "bystander errors"),
            ("daemon_restarts", "daemon crashes"),
            ("error_log_lines", "log lines at error level"),
            ("daemon_frames_rejected", "frames the daemon counted as rejected"),
        ],
    ),
    (
        "crash",
        "Crash durability (SIGKILL mid-call)",
        [
            ("conversations", "conversations"),
            ("in_flight_at_kill", "calls at the provider when killed"),
            ("answered_before_kill", "turns answered before the kill"),
            ("unread_answers_arranged", "of which clients arranged never to read their answer"),
            ("stored_but_unanswered", "turns stored whose answer never reached the client"),
            ("resent_after_restart", "calls re-sent with the same request_id after restart"),
            ("turns_stored", "turns stored in the end"),
            ("duplicate_turns", "turns stored twice"),
            ("answered_missing", "answered turns missing from the store"),
            ("conversations_continued", "conversations continued with full history"),
            ("outbox_events_at_kill", "audit events in the outbox at the kill"),
            ("events_delivered", "audit events delivered to Supabase (fixture)"),
            ("events_lost", "outbox events not delivered"),
            ("duplicate_rows", "duplicate rows stored"),
            ("redelivered_events", "events sent twice (idempotent on event_id)"),
            ("restart_s", "restart to /health, s"),
        ],
    ),
    (
        "storm",
        "Disconnect storm",
        [
            ("storms", "storms, one after the other"),
            ("clients", "clients per storm"),
            ("vanish_modes", "how they vanished"),
            ("calls_in_flight_peak", "calls in flight at the peak"),
            ("connections_after", "exai_connections afterwards"),
            ("calls_in_flight_after", "exai_calls_in_flight afterwards"),
            ("queued_after", "calls queued afterwards"),
            ("tasks_before", "asyncio tasks before"),
            ("tasks_after", "asyncio tasks afterwards"),
            ("sessions_peak", "sessions at the peak"),
            ("sessions_after_sweep", "sessions after the sweep"),
            ("sweep_s", "seconds until sessions were swept"),
            ("capacity_check_calls", "calls then run at full capacity"),
            ("capacity_check_errors", "errors among them (a leaked slot would show)"),
            ("rss_start_mib", "daemon RSS at start, MiB"),
            ("rss_peak_mib", "daemon RSS at the peak, MiB"),
            ("rss_after_round_mib", "daemon RSS after each storm, MiB"),
            ("rss_after_mib", "daemon RSS after the sweep, MiB"),
            ("fds_start", "open fds at start"),
            ("fds_after", "open fds afterwards"),
            ("provider_pool_sockets", "of which keep-alive sockets to the provider, start and end"),
            ("error_log_lines", "log lines at error level"),
        ],
    ),
    (
        "soak",
        "Soak",
        [
            ("connections", "concurrent connections held"),
            ("duration_s", "duration, s"),
            ("limits", "limits configured"),
            ("calls", "calls made"),
            ("ok", "calls answered"),
            ("over_capacity", "OVER_CAPACITY (configured)"),
            ("other_errors", "any other error"),
            ("disconnects", "connections lost"),
            ("connections_held_min", "fewest connections open at any check (once a second)"),
            ("throughput_per_s", "answered calls per second"),
            ("fast_calls_measured", "steady echo calls timed (client side, round trip)"),
            ("p50_ms", "their latency p50, ms"),
            ("p95_ms", "their latency p95, ms"),
            ("p99_ms", "their latency p99, ms"),
            ("max_ms", "their latency max, ms"),
            ("delayed_calls", "steady calls that sleep in the tool"),
            ("rss_peak_mib", "daemon RSS peak, MiB"),
            ("daemon_cpu_share", "daemon CPU, share of one core"),
            ("client_loop_lag", "event-loop lag of the measuring client"),
            ("error_log_lines", "log lines at error level"),
        ],
    ),
    (
        "provider",
        "Provider storms",
        [
            ("scenarios", "scenarios"),
            ("storm_calls", "concurrent calls through a 429/503 burst"),
            ("storm_failures_injected", "429/503 answers injected"),
            ("storm_calls_ok", "storm calls answered"),
            ("retries_observed", "retries observed at the emulator"),
            ("fallbacks", "answers from the fallback model"),
            ("min_gap_after_retry_after_s", "shortest wait after Retry-After, s"),
            ("min_backoff_s", "shortest backoff after a 503, s"),
            ("no_retry_statuses", "statuses never retried"),
            ("storm_without_fallback", "the same storm without a fallback model"),
        ],
    ),
    (
        "idempotency",
        "Idempotency attacks",
        [
            ("reuse_sessions", 'sessions reusing request ids "1", "2"... on shared threads'),
            ("reuse_threads", 'shared threads (each started with request id "1")'),
            ("reuse_turns", "turns asked"),
            ("reuse_turns_lost", "turns lost (asked and answered, not stored)"),
            ("reuse_turns_doubled", "turns stored twice"),
            ("reuse_old_answers", "old answers returned for a new question"),
            ("reuse_answers_not_as_stored", "answers that differ from the stored turn"),
            ("reuse_provider_calls", "provider calls"),
            ("reuse_retries", "same-session retries (before and after a restart)"),
            ("reuse_retries_not_replayed", "retries not answered with the first answer"),
            ("reuse_retries_provider_calls", "provider calls for retries"),
            ("reuse_other_calls_refused", "another call under a used id: REQUEST_ID_REUSED"),
            *(
                (f"kill_{backend}_{key}", f"{name}: {label}")
                for backend, name in (("sqlite", "SQLite"), ("postgres", "Postgres"))
                for key, label in _KILL_AFTER_STORE
            ),
            ("narrow_token_retries", 'calls re-sent by a token limited to ["echo"]'),
            ("narrow_token_refused", "of which FORBIDDEN"),
            ("narrow_token_results_leaked", "results leaked to it"),
            ("wide_token_results_after", "the wider token's results, still its own afterwards"),
            ("memory_results_sent", "results sent"),
            ("memory_replay_bound_mib", "EXAI_REPLAY_MAX_BYTES, MiB"),
            ("memory_replay_held_mib", "replay cache held at the peak, MiB"),
            ("memory_replay_entries_held", "results held at the peak"),
            ("memory_rss_start_mib", "daemon RSS at start, MiB"),
            ("memory_rss_full_mib", "daemon RSS with the cache full, MiB"),
            ("memory_sessions_swept_after_s", "seconds until the sessions ended (swept)"),
            ("memory_replay_held_after_mib", "replay cache held afterwards, MiB"),
            ("memory_rss_after_mib", "daemon RSS after the sessions ended, MiB"),
            ("memory_rss_second_round_mib", "daemon RSS after the same again, MiB"),
        ],
    ),
    (
        "prehello",
        "Attacks before login",
        [
            ("slow_frames_clients", "slow 60 MiB frames: clients that never said hello"),
            ("slow_frames_closes", "their connections closed, by code"),
            ("slow_frames_mib_the_clients_got_to_send", "MiB they got to send in all"),
            ("slow_frames_rss_start_mib", "daemon RSS before, MiB"),
            ("slow_frames_rss_peak_mib", "daemon RSS at the peak, MiB"),
            ("slow_frames_rss_after_mib", "daemon RSS after they left, MiB"),
            ("bomb_rounds", "compression bombs: rounds"),
            ("bomb_clients_per_round", "bombs per round (half whole, half fragments)"),
            ("bomb_wire_kb_per_client", "KB on the wire per bomb"),
            ("bomb_closes", "their connections closed, by code"),
            ("bomb_rss_start_mib", "daemon RSS before, MiB"),
            ("bomb_rss_peak_mib_by_round", "daemon RSS at each round's peak, MiB"),
            ("bomb_rss_after_mib_by_round", "daemon RSS after each round, MiB"),
            ("slow_headers_clients", "slow 1 MiB upgrade requests: clients"),
            ("slow_headers_kib_sent_per_client", "KiB each got to send"),
            ("slow_headers_clients_that_sent_it_all", "clients that sent it all"),
            ("slow_headers_rss_start_mib", "daemon RSS before, MiB"),
            ("slow_headers_rss_peak_mib", "daemon RSS at the peak, MiB"),
            ("slow_headers_rss_after_mib", "daemon RSS after they left, MiB"),
            ("silent_clients", "silent connections from one address, each holding a hello"),
            ("silent_upgraded", "upgraded"),
            ("silent_refused_429", "refused with HTTP 429"),
            ("silent_closes", "upgraded ones closed, by code"),
            ("silent_rss_start_mib", "daemon RSS before, MiB"),
            ("silent_rss_peak_mib", "daemon RSS at the peak, MiB"),
            ("silent_rss_after_mib", "daemon RSS after they left, MiB"),
            ("burst_after_login_clients", "logged-in clients sending 30 MiB in 16 KiB pieces"),
            ("burst_after_login_rss_start_mib", "daemon RSS before, MiB"),
            ("burst_after_login_rss_peak_mib", "daemon RSS at the peak, MiB"),
            ("burst_after_login_rss_after_mib", "daemon RSS after they vanished, MiB"),
            ("guess_seconds", "guessing: seconds"),
            ("guess_attempts", "hellos with a wrong token sent (20 connections)"),
            ("guess_attempts_per_s", "per second"),
            ("guess_tokens_checked", "tokens the daemon checked"),
            ("guess_outcomes", "answers"),
            ("guess_right_token_same_address", "the right token from the same address"),
            ("guess_right_token_other_address", "the right token from another address"),
            ("bystander_calls", "bystander echo calls meanwhile"),
            ("bystander_failures", "bystander failures"),
            ("error_log_lines", "log lines at error level"),
        ],
    ),
    (
        "http_listener",
        "Attacks on the HTTP listener",
        [
            ("slow_clients", "connections from one address dribbling headers"),
            ("slow_interval_s", "a header line every, s"),
            ("slow_hold_s", "each kept trying for, s"),
            ("slow_header_lines", "header lines sent in all"),
            ("slow_outcomes", "their outcomes (408: cut off, 429: over the allowance)"),
            ("slow_cut_after_s", "seconds from connecting to the 408"),
            ("slow_fds", "daemon descriptors"),
            ("bystander_calls", "echo calls over /mcp from another address meanwhile"),
            ("bystander_failures", "their failures"),
            ("error_log_lines", "log lines at error level"),
            ("body_clients", "logged-in requests whose body trickles (1 KiB every 0.5 s)"),
            ("body_timeout_s", "EXAI_HTTP_BODY_TIMEOUT_S in that run"),
            ("body_kib_sent", "KiB of body they got to send in all"),
            ("body_outcomes", "their outcomes"),
            ("body_cut_after_s", "seconds from connecting to the cut"),
            ("body_fds", "daemon descriptors"),
            ("per_address_cap", "EXAI_MAX_CONNECTIONS_PER_IP in that run"),
            ("per_address_held", "connections held from one address"),
            ("per_address_surplus", "connections beyond them"),
            ("per_address_surplus_outcomes", "their outcomes"),
        ],
    ),
    (
        "mcp_sessions",
        "Attacks on MCP sessions",
        [
            ("hijack_sessions", "Alice's sessions whose ids Bob holds"),
            ("hijack_tries", "Bob's tries (a call, a GET stream, a DELETE each)"),
            ("hijack_outcomes", "their outcomes"),
            ("hijack_owner_answered_after", "Alice's sessions still answering her afterwards"),
            ("flood_attempts", "initialize requests from one token"),
            ("flood_cap", "EXAI_MCP_MAX_SESSIONS_PER_PRINCIPAL"),
            ("flood_outcomes", "their outcomes"),
            ("flood_sessions_held", "sessions the daemon held at the end (exai_mcp_sessions)"),
            ("flood_sessions_after_delete", "sessions after they were deleted"),
            ("flood_rss_mib", "daemon RSS, MiB"),
            ("streams_rounds", "rounds of 100 GET streams written at once on one session"),
            ("streams_tried", "GET streams tried"),
            ("streams_outcomes", "their outcomes"),
            ("streams_accepted_per_round", "accepted in each round"),
        ],
    ),
    (
        "job_grants",
        "Attacks through scheduled jobs",
        [
            ("budget_principals", "principals whose JWT budget no prompt fits"),
            ("budget_direct_calls", "their direct chat calls"),
            ("budget_jobs", "chat jobs they scheduled"),
            ("budget_runs", "the jobs' runs"),
            ("budget_runs_never_started", "fires queued before a job was disabled, never run"),
            ("budget_provider_requests", "requests that reached the provider"),
            ("expiry_jobs", "jobs scheduled with a JWT expiring 3 s later, firing every 0.1 s"),
            ("expiry_runs_before", "runs before the expiry"),
            ("expiry_runs_after", "runs after it"),
            ("expiry_refused", "runs refused"),
            ("expiry_jobs_paused", "jobs paused"),
            ("expiry_paused_within_s", "latest pause after its JWT's expiry, s"),
            ("removed_jobs", "jobs scheduled with static tokens, then the tokens rotated out"),
            ("removed_runs_before", "runs before the restart"),
            ("removed_runs_after", "runs after it"),
            ("removed_jobs_paused", "jobs paused"),
            ("removed_tokens_found_in_the_store", "tokens found in the job store's files"),
            ("first_call_starts", "fresh daemons asked schedule as their first call"),
            ("first_call_outcomes", "outcomes (over WebSocket, over /mcp)"),
            ("first_call_refused_connections_before", "connection attempts before a port answered"),
        ],
    ),
    (
        "shim_token",
        "Wrong tokens through exai shim",
        [
            ("tries", "wrong credentials given to the shim"),
            ("kinds", "of which"),
            ("handshake_era_client", "a handshake-era client (ClientSession)"),
            ("modern_client", "a 2026-07-28 client (Client)"),
            ("right_token", "the right token, the same way"),
            ("daemon_error_log_lines", "daemon log lines at error level"),
        ],
    ),
    (
        "security",
        "Security",
        [
            ("cases", "cases checked"),
            ("auth_cases", "token and JWT cases"),
            ("scope_cases", "tools forbidden by scope"),
            ("ownership_cases", "other principal's session or conversation"),
            ("file_tools", "file-taking tools found in the registry"),
            ("file_fields", "(tool, path field) pairs"),
            ("file_fields_read_by_a_model", "of which the control's file reached the model"),
            ("path_attacks", "path traversal and symlink attempts"),
            ("path_leaks", "outside file contents leaked"),
            ("oversize_and_slow_cases", "oversized frame and slow-client cases"),
            ("secrets_scanned", "known secrets searched for"),
            ("log_lines_scanned", "log lines scanned"),
            ("audit_events_scanned", "audit events scanned (outbox and Supabase fixture)"),
            ("secrets_found", "secrets found"),
        ],
    ),
    (
        "attack_subprocess",
        "Attacks through subprocesses (git, bridged MCP servers)",
        [
            ("git_settings_naming_a_program", "git settings naming a hostile program"),
            ("hooks_installed", "hooks installed (.git/hooks and core.hooksPath)"),
            ("attribute_sources", "attribute sources routing files through filters"),
            ("git_env_variables", "hostile GIT_* variables in the daemon's environment"),
            ("precommit_calls", "precommit calls on the hostile repository"),
            ("precommit_outcomes", "their outcomes"),
            ("diffs_that_reached_the_model", "calls whose real diff reached the model"),
            ("hostile_programs_run", "hostile programs that ran"),
            ("escaping_repositories", "repositories reaching outside the root"),
            ("escaping_repository_calls", "precommit calls on them"),
            ("outside_content_read", "calls that read content from outside the root"),
            ("bridged_server_starts_inspected", "bridged MCP server starts inspected"),
            (
                "bridged_server_variables_beyond_the_minimal_set",
                "variables it got beyond the minimal set and its own",
            ),
            ("bridged_server_secrets_seen", "daemon secrets it saw"),
            ("secrets_searched", "secrets searched for (results, provider, store, outbox, log)"),
            ("secrets_found", "secrets found"),
        ],
    ),
    (
        "attack_files",
        "Attacks on the file policy (symlink races, hard links)",
        [
            ("race_calls", "file calls while a process swaps symlinks"),
            ("race_outcomes", "their outcomes"),
            ("race_internal_errors", "INTERNAL_ERROR among them"),
            ("race_outside_content_leaked", "answers or provider requests with outside content"),
            ("race_error_log_lines", "log lines at error level"),
            ("hard_link_tool_fields", "(tool, path field) pairs given a hard link to outside"),
            ("hard_link_calls", "calls made (the link named, its directory named)"),
            ("hard_link_outside_content_leaked", "answers or provider requests with its content"),
        ],
    ),
    (
        "attack_notify",
        "Attacks through job notifications (internal addresses, rebinding, credentials)",
        [
            ("forms", "spellings of internal addresses"),
            ("created_tries", "schedule calls naming them (ntfy and webhook)"),
            ("creation_outcomes", "their outcomes"),
            ("stored_tried", "the same targets stored directly and run"),
            ("stored_refused_at_send", "refused at their send, kept undeliverable"),
            ("stored_attempts", "attempts each"),
            ("rebinding_rounds", "DNS-rebinding names (public at creation, internal at send)"),
            ("rebinding_refused", "refused at their send"),
            ("lookups_per_send", "lookups per send"),
            ("redirect_tries", "302 answers"),
            ("redirects_followed", "redirects followed"),
            ("internal_requests", "requests that reached the internal receiver"),
            ("control_delivered", "control sent to an allowed host, delivered"),
            ("credential_urls", "jobs with credentials in their notification URL"),
            ("views_scanned", "views read back (tools, exai jobs, errors)"),
            ("secrets_shown", "secrets shown"),
        ],
    ),
    (
        "attack_memory_block",
        "Attacks on the memory block",
        [
            ("forged_memories", "memories forging the block's tags"),
            ("blocks_built", "blocks built from them"),
            ("blocks_escaped", "blocks a memory closed or forged"),
            ("blocks_not_byte_stable", "blocks not the same bytes when built again"),
            ("through_a_daemon", "forged memories remembered, then a new thread"),
            ("system_prompts_checked", "system prompts read at the provider"),
            ("system_prompts_sealed", "of which with the block intact"),
        ],
    ),
    (
        "attack_budget",
        "Budget overruns under concurrency",
        [
            ("budget", "budget"),
            ("spent_before", "already spent before each storm"),
            ("storms", "storms"),
            ("calls_per_storm", "concurrent calls per storm"),
            ("calls", "calls"),
            ("admitted", "admitted"),
            ("refused", "refused with BUDGET_EXCEEDED"),
            ("other_errors", "other errors"),
            ("provider_requests", "provider requests"),
            ("worst_spend_over_budget", "highest spend at the end, over the budget"),
            ("at_91_percent", "the attack run's case (91% spent), by reply cap"),
        ],
    ),
    (
        "attack_schedule",
        "Attacks on schedules and the operator's view",
        [
            ("inputs_tried", "hostile when and timezone values"),
            ("outcomes", "their outcomes"),
            ("old_rows_stored", "rows an older daemon could have stored"),
            ("listing_exit_codes", "exai jobs list (text and --json) exit codes"),
            ("rows_shown_as_unreadable", "rows shown as unreadable, with their id"),
        ],
    ),
    (
        "attack_inputs",
        "Hostile prices, CLI numbers and Host headers",
        [
            ("prices_tried", "absurd prices in EXAI_MODELS_FILE"),
            ("prices_refused", "refused at load, naming model and field"),
            ("serve_refused_to_start", "exai serve refused to start on one"),
            ("serve_exited_by_itself", "and exited by itself"),
            ("cli_runs", "exai runs with an out-of-range number"),
            ("cli_exit_codes", "their exit codes"),
            ("cli_tracebacks", "tracebacks"),
            ("host_headers_tried", "hostile Host headers on a loopback daemon"),
            ("host_statuses", "their statuses"),
            ("host_passed", "passed"),
            ("host_controls_passed", "loopback controls passed"),
        ],
    ),
    # The model faces' attack families: every figure each records, under its name.
    ("attack_faces_budget", "Attacks on the model faces: budgets with replayed reasoning", []),
    ("attack_faces_bodies", "Attacks on the model faces: hostile bodies", []),
    ("attack_faces_readiness", "Attacks on the model faces: readiness under audit loss", []),
    ("attack_faces_traces", "Attacks on the model faces: traces without content", []),
    ("attack_faces_carriers", "Attacks on the model faces: sealed carriers", []),
]


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) or "none"
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def render(data: dict[str, Any]) -> str:
    """The figures as markdown: a line about the run, then one table per area."""
    run = data.get("run", {})
    sections: dict[str, dict[str, Any]] = data.get("sections", {})
    tests = run.get("tests", {})
    lines = [
        f"Run finished {run.get('finished_at', '?')} in {run.get('duration_s', '?')} s "
        f"(`{run.get('command', 'make reliability')}`, scale {run.get('scale', 1)}, "
        f"Python {run.get('python', '?')}, {run.get('cpus', '?')} CPUs): "
        f"{tests.get('passed', 0)} tests passed, {tests.get('failed', 0)} failed.",
        "",
    ]
    known = {name for name, _, _ in LAYOUT}
    layout = LAYOUT + [(name, name, []) for name in sorted(sections) if name not in known]
    for name, title, labels in layout:
        figures = sections.get(name)
        if not figures:
            continue
        lines += [f"### {title}", "", "| figure | value |", "|---|---|"]
        shown = set()
        for key, label in labels:
            if key in figures:
                lines.append(f"| {label} | {_value(figures[key])} |")
                shown.add(key)
        for key in sorted(set(figures) - shown):
            lines.append(f"| {key} | {_value(figures[key])} |")
        lines.append("")
    return "\n".join(lines)


def update(document: Path, markdown: str) -> None:
    text = document.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{document}: no {BEGIN} ... {END} markers to replace")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    document.write_text(f"{head}{BEGIN}\n{markdown.rstrip()}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("build/reliability/figures.json"))
    parser.add_argument("--update", type=Path, metavar="DOC", help="rewrite DOC between markers")
    args = parser.parse_args(argv)
    markdown = render(json.loads(args.results.read_text()))
    if args.update is not None:
        update(args.update, markdown)
    else:
        sys.stdout.write(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
