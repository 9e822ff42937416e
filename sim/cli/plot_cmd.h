/* plot_cmd.h — `kvsim plot`: figures drawn again from result files, without simulating.
 *   kvsim plot --in DIR [--out DIR2] [--slo-ttft DUR] [--title T]
 *       the figures of a run/compare result directory from its files: ttft_cdf/ccdf/split.svg
 *       and ttft_history.svg from requests.csv, utilisation.svg from utilisation.csv,
 *       timeline.svg from timeline.csv (each where its file is there); the SLO line from
 *       --slo-ttft, else summary.json's slo_ttft.
 *   kvsim plot --sweep FILE.csv|FILE.db --x KEY [--y KEY] [--metric M] --out DIR [--title T]
 *       slo_vs_load.svg, metric_vs_load.svg (with --metric), heatmap.svg (with --y) of a sweep's
 *       tidy CSV or results database (results/plot_sweep.h).
 * Responsible for: the options, reading requests.csv into per-policy histograms (every row: warm-up
 * and cool-down requests included, unlike summary.json's), naming the files. Not responsible for:
 * the figures (results/plot*.c). Exit status 0, 1 (files), 2 (usage).
 */
#ifndef KV_PLOT_CMD_H
#define KV_PLOT_CMD_H

int plot_main(int argc, char **argv);

#endif
