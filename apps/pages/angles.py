"""Initial angles between pre-rotation query and key per rotary plane (CoCA, sections 2.2-2.3)."""
from apps.pages._diagnostic import Diagnostic, make_layout, register
from workbench.analysis.angles import rotary_schemes

PATH, NAME, ORDER = "/angles", "Initial angles", 4
SPEC = Diagnostic(
    prefix="ang", title="Initial angles", analysis="angles", figures=[("angles", {}), ("angles_profile", {})],
    blurb="For rotary models, the angle Theta_j between the pre-rotation query and key in each rotary plane, over "
          "sampled token pairs: per layer, head and plane, the share of pairs in the anomalous scenarios (attention "
          "to the tau closest tokens abnormally low) and the number of closest tokens affected. CoCA gives "
          "Theta_j = 0 by construction. Each statistic is read against its value for uniform random angles "
          "(heatmaps: the difference, white = chance; profile: the dotted baseline). Table columns: theta, the "
          "plane's rotation frequency (radians per position); cycles, the turns it makes over the training length "
          "(theta L / 2 pi; below 1 it never completes one); share_anomalous, share_a, share_d, the share of "
          "sampled token pairs in the anomalous scenarios (a) or (d), together and each (0-1), next to uniform_*, "
          "the same for uniform random angles; share_affected, the share of the tau closest tokens affected; "
          "tau_mean, the number of closest tokens affected (tokens); angle_circmean, the circular mean of the "
          "angle (radians, 0 to 2 pi); angle_resultant, its resultant length (0: spread evenly, 1: all equal).",
    applies=f"rotary schemes ({rotary_schemes()})",
    choice=("value", "statistic", ["share_anomalous", "weighted_share_anomalous", "share_affected", "tau_mean",
                                   "tau_median", "angle_resultant", "mean_cos"]),
    summary_columns=["layer", "head", "plane", "theta", "cycles", "share_anomalous", "share_a", "share_d",
                     "uniform_share_anomalous", "share_affected", "uniform_share_affected", "tau_mean",
                     "angle_circmean", "angle_resultant"],
)
layout = make_layout(SPEC)


def register_callbacks(app):
    register(app, SPEC)
