-- exai baseline collector: one row per workload per run (`exai baseline --upload`).
--
-- The figures operators chart over time are columns; the full per-workload summary is in
-- `summary` and the run's context (host, URL, duration, ...) in `run` on the '(all)' row.
-- Uploads are idempotent on (run_id, workload): the collector inserts with
-- ON CONFLICT DO NOTHING. Row level security is on and only the service role may insert or
-- read; anon and authenticated get nothing. The role grants run only where Supabase's roles
-- exist, so the same file applies to a plain Postgres as well.

create table if not exists public.performance_baselines (
    run_id           uuid             not null,
    workload         text             not null,
    tool             text             not null,
    started_at       timestamptz      not null,
    server_version   text,
    calls            integer          not null,
    ok               integer          not null,
    errors           integer          not null,
    success_rate     double precision not null,
    p50_ms           double precision,
    p95_ms           double precision,
    p99_ms           double precision,
    max_ms           double precision,
    throughput_per_s double precision not null,
    retries          integer          not null default 0,
    resends          integer          not null default 0,
    errors_by_code   jsonb            not null default '{}'::jsonb,
    summary          jsonb            not null default '{}'::jsonb,
    run              jsonb            not null default '{}'::jsonb,
    received_at      timestamptz      not null default now(),
    primary key (run_id, workload)
);

comment on table public.performance_baselines is
    'exai baseline collector: per-workload latency, throughput and success summaries per run';

create index if not exists performance_baselines_workload_started_idx
    on public.performance_baselines (workload, started_at desc);

alter table public.performance_baselines enable row level security;

do $$
begin
    if exists (select 1 from pg_roles where rolname = 'anon') then
        execute 'revoke all on table public.performance_baselines from anon';
    end if;
    if exists (select 1 from pg_roles where rolname = 'authenticated') then
        execute 'revoke all on table public.performance_baselines from authenticated';
    end if;
    if exists (select 1 from pg_roles where rolname = 'service_role') then
        execute 'grant select, insert on table public.performance_baselines to service_role';
        execute 'drop policy if exists performance_baselines_service_insert '
                'on public.performance_baselines';
        execute 'create policy performance_baselines_service_insert '
                'on public.performance_baselines for insert to service_role with check (true)';
        execute 'drop policy if exists performance_baselines_service_select '
                'on public.performance_baselines';
        execute 'create policy performance_baselines_service_select '
                'on public.performance_baselines for select to service_role using (true)';
    end if;
end
$$;
