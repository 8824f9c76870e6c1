# SPDX-License-Identifier: MIT
# fragsim: the capacity each job of a sweep needs under each setting, one line per job (a trace,
# or the worst rank of a group of ranks).  The lowest point of a line is the job's best setting.
#
# gnuplot -c sweep-needed.gp DATA OUT FORMAT TITLE UNIT JOBS SETTINGS LOG
#   DATA   a header line (the word "setting", then each job's name, double-quoted), then one line
#          per setting: its label (double-quoted), then each job's needed capacity in UNIT, or ?
#          where the job has no figure for it (an error, or no run)
#   TITLE  the title (enhanced text, already escaped); UNIT the memory unit; JOBS the number of
#          jobs (the data's columns after the first), SETTINGS the number of settings (lines);
#          LOG 1 for a logarithmic y axis (jobs of very different sizes), 0 for a linear one
DATA = ARG1
UNIT = ARG5
JOBS = int(ARG6)
N = int(ARG7)
set datafile missing "?"
WIDTH = 900 + 40 * N
if (ARG3 eq "svg") {
    set terminal svg size WIDTH,620 dynamic enhanced font "sans,12" background rgb "white"
} else {
    set terminal pngcairo size WIDTH,620 enhanced font "sans,11" background rgb "white"
}
set output ARG2
set title ARG4 font ",14"
set ylabel sprintf("needed capacity (%s)", UNIT)
set border 3 lc rgb "#555555"
set xtics nomirror rotate by -30 scale 0 noenhanced
set ytics nomirror
if (int(ARG8)) { set logscale y 2 }
set grid ytics lc rgb "#e8e8e8" lw 1 dt 1
set xrange [-0.5:N - 0.5]
set key outside right top vertical noenhanced
set bmargin 10
plot for [i = 2:JOBS + 1] DATA using 0:i:xtic(1) with linespoints lw 2 pt 7 ps 1.1 \
    title columnheader(i)
