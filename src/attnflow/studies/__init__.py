"""Studies: a registry of experiments that check a claim, each a pydantic config, runs on the run store
(resumable, local or on Dask) and an analysis writing ``summary.json``, ``table.md`` and figures.

    from attnflow.studies import available_studies, run_study, study_info
    available_studies()                                    # {"massucco2026": "Sec. 6 of ...", ...}
    summary = run_study("massucco2026", "out/q", quick=True)   # figures=attnflow.plot.figures_for(name)
    study_info("out/q")["status"]                          # "done"

The command line: ``attnflow study list``, ``attnflow study run NAME --out DIR [--quick]``,
``attnflow study run-all --out DIR [--quick]`` (every study, their tasks in one pool: :func:`run_all`),
``attnflow study show DIR``. A new study is one file: a :class:`Study` subclass decorated with
:func:`study` whose ``plan`` declares tasks (:mod:`attnflow.studies.tasks`) and whose ``analyse`` returns
a :class:`StudyResult`; ``attnflow study run path/to/file.py:ClassName`` runs it (see
:mod:`attnflow.studies.base`).
"""

from .base import (
    FigureCallback as FigureCallback,
    Study as Study,
    StudyConfig as StudyConfig,
    StudyResult as StudyResult,
    StudyRuns as StudyRuns,
    validate_params as validate_params,
)
from .depth_limit import DepthLimitConfig as DepthLimitConfig, DepthLimitStudy as DepthLimitStudy  # registers
from .errors import (
    NotAStudyDirectoryError as NotAStudyDirectoryError,
    StudyConfigError as StudyConfigError,
    StudyMismatchError as StudyMismatchError,
    StudyPlanError as StudyPlanError,
    StudyResultError as StudyResultError,
    StudyRunError as StudyRunError,
    UnknownStudyError as UnknownStudyError,
)
from .jko_stability import (
    JKOStabilityConfig as JKOStabilityConfig,
    JKOStabilityStudy as JKOStabilityStudy,
)  # registers
from .layer_scaling import LayerScalingConfig as LayerScalingConfig, LayerScalingStudy as LayerScalingStudy
from .longtime import LongtimeConfig as LongtimeConfig, LongtimeStudy as LongtimeStudy  # registers it
from .massucco2026 import (  # importing it registers the shipped reproductions
    ReproductionConfig as ReproductionConfig,
    ReproductionStudy as ReproductionStudy,
    markdown_tables as markdown_tables,
    reproduce as reproduce,
)
from .massucco2026_robustness import (  # registers it
    RobustnessConfig as RobustnessConfig,
    RobustnessStudy as RobustnessStudy,
)
from .mean_field_heads import (  # importing it registers the study
    MeanFieldHeadsConfig as MeanFieldHeadsConfig,
    MeanFieldHeadsStudy as MeanFieldHeadsStudy,
)
from .multihead_entropy import EntropyStudy as EntropyStudy  # importing registers the multi-head studies
from .multihead_flows import (
    MonotonicityStudy as MonotonicityStudy,
    SufficientConditionStudy as SufficientConditionStudy,
)
from .multihead_reduced import (
    CriticalBetaStudy as CriticalBetaStudy,
    ReluVsSoftmaxStudy as ReluVsSoftmaxStudy,
    SuperadditivityStudy as SuperadditivityStudy,
)
from .noise_phase import NoisePhaseConfig as NoisePhaseConfig, NoisePhaseStudy as NoisePhaseStudy  # registers
from .ntk_injectivity import (  # registers it
    NtkInjectivityConfig as NtkInjectivityConfig,
    NtkInjectivityStudy as NtkInjectivityStudy,
)
from .numerics_checks import (  # registers it
    NumericsChecksConfig as NumericsChecksConfig,
    NumericsChecksStudy as NumericsChecksStudy,
)
from .pde_particles import PdeParticlesConfig as PdeParticlesConfig, PdeParticlesStudy as PdeParticlesStudy
from .real_model import RealModelConfig as RealModelConfig, RealModelStudy as RealModelStudy  # registers it
from .real_model_flows import (  # registers it
    FlowsConfig as FlowsConfig,
    RealModelFlowsStudy as RealModelFlowsStudy,
)
from .registry import (
    available_studies as available_studies,
    get_study as get_study,
    register as register,
    study as study,
    unregister as unregister,
)
from .render import Column as Column, Table as Table
from .run_all import run_all as run_all, select_studies as select_studies
from .runner import StudySummary as StudySummary, run_study as run_study, study_info as study_info
from .stability_input import (  # registers it
    StabilityInputConfig as StabilityInputConfig,
    StabilityInputStudy as StabilityInputStudy,
)
from .stability_weights import (  # registers it
    StabilityWeightsConfig as StabilityWeightsConfig,
    StabilityWeightsStudy as StabilityWeightsStudy,
)
from .tasks import (
    ComputeTask as ComputeTask,
    ParticleRun as ParticleRun,
    PdeRun as PdeRun,
    TrainingRun as TrainingRun,
)

__all__ = [
    "Column",
    "ComputeTask",
    "CriticalBetaStudy",
    "FigureCallback",
    "ParticleRun",
    "PdeRun",
    "StudyPlanError",
    "StudyResult",
    "StudyResultError",
    "StudySummary",
    "Table",
    "TrainingRun",
    "study",
    "DepthLimitConfig",
    "DepthLimitStudy",
    "EntropyStudy",
    "FlowsConfig",
    "MonotonicityStudy",
    "ReluVsSoftmaxStudy",
    "SufficientConditionStudy",
    "SuperadditivityStudy",
    "JKOStabilityConfig",
    "JKOStabilityStudy",
    "LayerScalingConfig",
    "LayerScalingStudy",
    "LongtimeConfig",
    "LongtimeStudy",
    "MeanFieldHeadsConfig",
    "MeanFieldHeadsStudy",
    "NoisePhaseConfig",
    "NoisePhaseStudy",
    "NotAStudyDirectoryError",
    "NtkInjectivityConfig",
    "NumericsChecksConfig",
    "NumericsChecksStudy",
    "NtkInjectivityStudy",
    "RealModelConfig",
    "RealModelFlowsStudy",
    "RealModelStudy",
    "PdeParticlesConfig",
    "PdeParticlesStudy",
    "ReproductionConfig",
    "ReproductionStudy",
    "RobustnessConfig",
    "RobustnessStudy",
    "Study",
    "StabilityInputConfig",
    "StabilityInputStudy",
    "StabilityWeightsConfig",
    "StabilityWeightsStudy",
    "StudyConfig",
    "StudyConfigError",
    "StudyMismatchError",
    "StudyRunError",
    "StudyRuns",
    "UnknownStudyError",
    "available_studies",
    "get_study",
    "markdown_tables",
    "register",
    "reproduce",
    "run_all",
    "run_study",
    "select_studies",
    "study_info",
    "unregister",
    "validate_params",
]
