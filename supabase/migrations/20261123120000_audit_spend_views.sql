-- exai spend: views that chart what calls cost, per day, principal, tool and model.
--
-- Every `call_finished` event of a call that asked a model carries, in `data`, `charges`:
-- one object per model call with `model`, `provider`, its token counts (`prompt_tokens`,
-- `cached_prompt_tokens`, `completion_tokens`, `reasoning_tokens`) and, when the model has a
-- price, `currency` and `cost` (currency units, at the prices of the daemon's model catalogue).
-- The views sum those, one row per currency: amounts in different currencies are never added.
-- Days are UTC days, the periods budgets use. Calls to unpriced models appear with a null
-- currency and cost, and their tokens. Apply after the audit_events migration.
--
-- Views run with the caller's rights (security_invoker), so they expose nothing the caller
-- could not read from audit_events itself (the service role only, see that migration).

-- One row per model call (a charge), the base of the views below.
create or replace view public.audit_spend_charges
with (security_invoker = true) as
select
    (date_trunc('day', e.ts at time zone 'UTC'))::date              as day,
    e.ts,
    e.principal,
    e.tool,
    e.request_id,
    c ->> 'provider'                                                 as provider,
    c ->> 'model'                                                    as model,
    c ->> 'currency'                                                 as currency,
    coalesce((c ->> 'prompt_tokens')::bigint, 0)                     as prompt_tokens,
    coalesce((c ->> 'cached_prompt_tokens')::bigint, 0)              as cached_prompt_tokens,
    coalesce((c ->> 'completion_tokens')::bigint, 0)                 as completion_tokens,
    coalesce((c ->> 'reasoning_tokens')::bigint, 0)                  as reasoning_tokens,
    (c ->> 'cost')::numeric                                          as cost
from public.audit_events e
cross join lateral jsonb_array_elements(
    case when jsonb_typeof(e.data -> 'charges') = 'array' then e.data -> 'charges'
         else '[]'::jsonb end
) as c
where e.kind = 'call_finished';

comment on view public.audit_spend_charges is
    'exai: one row per model call, from the charges of call_finished events';

create or replace view public.audit_spend_daily
with (security_invoker = true) as
select day, principal, tool, provider, model, currency,
       count(*) as model_calls, count(distinct request_id) as tool_calls,
       sum(prompt_tokens) as prompt_tokens, sum(cached_prompt_tokens) as cached_prompt_tokens,
       sum(completion_tokens) as completion_tokens, sum(reasoning_tokens) as reasoning_tokens,
       sum(cost) as cost
from public.audit_spend_charges
group by 1, 2, 3, 4, 5, 6;

create or replace view public.audit_spend_per_principal_daily
with (security_invoker = true) as
select day, principal, currency,
       count(*) as model_calls, count(distinct request_id) as tool_calls,
       sum(prompt_tokens) as prompt_tokens, sum(cached_prompt_tokens) as cached_prompt_tokens,
       sum(completion_tokens) as completion_tokens, sum(cost) as cost
from public.audit_spend_charges
group by 1, 2, 3;

create or replace view public.audit_spend_per_tool_daily
with (security_invoker = true) as
select day, tool, currency,
       count(*) as model_calls, count(distinct request_id) as tool_calls,
       sum(prompt_tokens) as prompt_tokens, sum(cached_prompt_tokens) as cached_prompt_tokens,
       sum(completion_tokens) as completion_tokens, sum(cost) as cost
from public.audit_spend_charges
group by 1, 2, 3;

create or replace view public.audit_spend_per_model_daily
with (security_invoker = true) as
select day, provider, model, currency, count(*) as model_calls,
       sum(prompt_tokens) as prompt_tokens, sum(cached_prompt_tokens) as cached_prompt_tokens,
       sum(completion_tokens) as completion_tokens, sum(cost) as cost,
       round(sum(cached_prompt_tokens)::numeric / nullif(sum(prompt_tokens), 0), 4)
                                                                     as cached_share
from public.audit_spend_charges
group by 1, 2, 3, 4;

do $$
begin
    if exists (select 1 from pg_roles where rolname = 'service_role') then
        execute 'grant select on public.audit_spend_charges, public.audit_spend_daily, '
                'public.audit_spend_per_principal_daily, '
                'public.audit_spend_per_tool_daily, public.audit_spend_per_model_daily '
                'to service_role';
    end if;
end
$$;
