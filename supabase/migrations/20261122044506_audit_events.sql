-- exai audit trail: the table the `supabase` and `postgres` sinks insert into.
--
-- Columns are the fields queries filter on; everything else an event carries is in `data`.
-- Inserts are idempotent on event_id (the sinks use ON CONFLICT (event_id) DO NOTHING).
-- Row level security is on and only the service role may insert or read; anon and
-- authenticated get nothing. The role grants run only where Supabase's roles exist, so
-- the same file applies to a plain Postgres (the `postgres` sink) as well.

create table if not exists public.audit_events (
    event_id    uuid        primary key,
    kind        text        not null,
    ts          timestamptz not null,
    instance_id text        not null,
    session_id  text,
    request_id  text,
    thread_id   text,
    principal   text,
    tool        text,
    data        jsonb       not null default '{}'::jsonb,
    received_at timestamptz not null default now()
);

comment on table public.audit_events is
    'exai audit trail: one row per event, written by the daemon''s shipper; see exai.audit';

create index if not exists audit_events_ts_idx on public.audit_events (ts desc);
create index if not exists audit_events_kind_ts_idx on public.audit_events (kind, ts desc);
create index if not exists audit_events_session_idx
    on public.audit_events (session_id, ts) where session_id is not null;
create index if not exists audit_events_request_idx
    on public.audit_events (request_id) where request_id is not null;
create index if not exists audit_events_thread_idx
    on public.audit_events (thread_id, ts) where thread_id is not null;

alter table public.audit_events enable row level security;

do $$
begin
    if exists (select 1 from pg_roles where rolname = 'anon') then
        execute 'revoke all on table public.audit_events from anon';
    end if;
    if exists (select 1 from pg_roles where rolname = 'authenticated') then
        execute 'revoke all on table public.audit_events from authenticated';
    end if;
    if exists (select 1 from pg_roles where rolname = 'service_role') then
        execute 'grant select, insert on table public.audit_events to service_role';
        execute 'drop policy if exists audit_events_service_insert on public.audit_events';
        execute 'create policy audit_events_service_insert on public.audit_events '
                'for insert to service_role with check (true)';
        execute 'drop policy if exists audit_events_service_select on public.audit_events';
        execute 'create policy audit_events_service_select on public.audit_events '
                'for select to service_role using (true)';
    end if;
end
$$;

-- Views run with the caller's rights (security_invoker), so they expose nothing the
-- caller could not read from audit_events itself.

create or replace view public.audit_calls_per_tool_hourly
with (security_invoker = true) as
select
    date_trunc('hour', ts)                                  as hour,
    tool,
    count(*)                                                as calls,
    count(*) filter (where data ->> 'status' = 'error')     as errors,
    round(avg((data ->> 'duration_ms')::double precision)::numeric, 1) as avg_duration_ms,
    percentile_cont(0.95) within group (order by (data ->> 'duration_ms')::double precision)
                                                            as p95_duration_ms
from public.audit_events
where kind = 'call_finished'
group by 1, 2;

create or replace view public.audit_errors_by_code
with (security_invoker = true) as
select
    kind,
    coalesce(data ->> 'error_code', data ->> 'reason', 'UNKNOWN') as error_code,
    count(*)                                                       as occurrences,
    min(ts)                                                        as first_seen,
    max(ts)                                                        as last_seen
from public.audit_events
where data ->> 'status' = 'error' or kind = 'auth_failed'
group by 1, 2;

create or replace view public.audit_provider_latency
with (security_invoker = true) as
select
    date_trunc('hour', ts)                                       as hour,
    data ->> 'provider'                                          as provider,
    data ->> 'model'                                             as model,
    count(*)                                                     as requests,
    count(*) filter (where data ->> 'status' = 'error')          as errors,
    percentile_cont(0.50) within group (order by (data ->> 'latency_ms')::double precision)
                                                                 as p50_ms,
    percentile_cont(0.90) within group (order by (data ->> 'latency_ms')::double precision)
                                                                 as p90_ms,
    percentile_cont(0.99) within group (order by (data ->> 'latency_ms')::double precision)
                                                                 as p99_ms,
    sum((data ->> 'prompt_tokens')::bigint)                      as prompt_tokens,
    sum((data ->> 'completion_tokens')::bigint)                  as completion_tokens,
    sum((data ->> 'retries')::bigint)                            as retries
from public.audit_events
where kind = 'provider_request'
group by 1, 2, 3;

do $$
begin
    if exists (select 1 from pg_roles where rolname = 'service_role') then
        execute 'grant select on public.audit_calls_per_tool_hourly, '
                'public.audit_errors_by_code, public.audit_provider_latency to service_role';
    end if;
end
$$;
