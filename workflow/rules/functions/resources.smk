# What each model job asks its scheduler for (icl_gd/planning/resources.py): its predicted peak memory
# and time from results/cost_estimate.tsv (`snakemake cost_estimate`) with a safety factor, grown
# by attempt (the profile's retries), capped at partition_limits; a job without an estimate asks for
# its rule's fallback. A plan whose first requests exceed partition_limits stops here.


COST_ESTIMATE = resources_.read_estimate()
resources_.check_limits(COST_ESTIMATE, config["partition_limits"])


def job_request(fallback_mb, fallback_min, what):
    """A model rule's ``what`` (mem_mb or runtime) callable: Snakemake calls it with the job's
    wildcards and attempt. The fallback: the rule's request where the estimate has no such job."""

    def ask(wildcards, attempt):
        estimate = resources_.lookup(COST_ESTIMATE, wildcards)
        return resources_.request(estimate, (fallback_mb, fallback_min), attempt, config["partition_limits"])[what]

    return ask
