# Relative error of the in-network sum against float64, per data set, over n.
#   gnuplot -e "in='bench/results/numerics.csv'; out='bench/results/numerics.png'" \
#           bench/plot/numerics.gp
# The CSV is bench_numerics --csv: per data set, per n (nr values, default
# 6), four rows: 1024/rn, 1024/sr, tensor/rn, tensor/sr.
if (!exists("in")) in = 'bench/results/numerics.csv'
if (!exists("out")) out = 'bench/results/numerics.png'
if (!exists("nr")) nr = 6
set terminal pngcairo size 1500,900 font ",10"
set output out
set datafile separator ","
set datafile missing "nan"
set logscale xy
set format y "10^{%L}"
set xtics (2, 4, 8, 16, 32, 64)
set xrange [1.7:75]
set yrange [1e-9:1e4]
set grid
set key top left horizontal maxrows 3 font ",8" samplen 2
dists = "normal normal*1e-4 normal*1e5 llm t3"
set multiplot layout 2,3 title "CAIS in-network sum: relative L2 error vs float64 (lower is better; missing points: overflow, falls back to the ring)"
do for [d = 0:4] {
	b = d * nr * 4
	set title word(dists, d + 1)
	set xlabel "ranks n"
	set ylabel "||x - ref|| / ||ref||"
	plot in every 4::(b + 1 + 0)::(b + nr * 4) using 2:6 with linespoints lw 2 pt 7 title "scale 1024, nearest", \
	     in every 4::(b + 1 + 1)::(b + nr * 4) using 2:6 with linespoints lw 2 pt 5 title "scale 1024, stochastic", \
	     in every 4::(b + 1 + 2)::(b + nr * 4) using 2:6 with linespoints lw 2 pt 9 title "per-tensor, nearest", \
	     in every 4::(b + 1 + 3)::(b + nr * 4) using 2:6 with linespoints lw 2 pt 11 title "per-tensor, stochastic", \
	     in every 4::(b + 1)::(b + nr * 4) using 2:11 with lines dt 2 lc rgb "gray40" title "ring (fp32)", \
	     1e-3 with lines dt 3 lc rgb "red" title "alarm 1e-3"
}
unset multiplot
