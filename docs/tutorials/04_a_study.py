# %% [markdown]
# # A study, and its report
#
# A study is a claim, the runs that test it and an analysis (summary.json, table.md, figures). The
# registered ones are listed by `available_studies()` (`attnflow study list`). Each has a quick
# variant that runs in seconds; its full variant is committed under `docs/studies/NAME/` with a verdict
# in the theory checks. Here: the quick variant of `stability_weights` (Sec. 5.2: the flow is stable
# under a perturbation of the heads).

# %%
from pathlib import Path

from attnflow.plot.studies import figures_for
from attnflow.report import write_report
from attnflow.studies import available_studies, run_study, study_info

for name, claim in available_studies().items():
    print(f"{name:28s} {claim[:90]}")

# %%
out = Path("out") / "tutorial_stability_weights"
summary = run_study("stability_weights", out, quick=True, workers=1, figures=figures_for("stability_weights"))
info = study_info(out)
print(f"status: {info['status']} | runs: {info['counts']} | wall time: {summary['wall_time_s']:.1f} s")
print(info["table"])

# %% [markdown]
# `attnflow report DIR` (or `write_report`) turns the directory into one self-contained HTML page:
# config, tables, verdicts, the ledger and G^2 with bands over paths, the figures and a 3-D token cloud
# with a time slider (thinned, as the page states).

# %%
page = write_report(out)
print(page.name, f"{page.stat().st_size / 2**20:.1f} MiB")
