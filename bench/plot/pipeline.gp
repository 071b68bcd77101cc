# The switch's pipeline on one lcore: payload Gb/s of the pipeline, of the
# bare add kernel (the limit) and their ratio, against elements per packet,
# one line per rank count.
#   gnuplot -e "in='bench/results/pipeline.csv'; out='bench/results/pipeline.png'" bench/plot/pipeline.gp
# The CSV is bench_pipeline --csv: elems,ranks,pipeline_mpps,pipeline_gbps,
# io_mpps,kernel_mpps,kernel_gbps,pipeline_vs_kernel,pipeline_vs_io,results_per_round
if (!exists("in")) in = 'bench/results/pipeline.csv'
if (!exists("out")) out = 'bench/results/pipeline.png'
set terminal pngcairo size 1400,560 font ",10"
set output out
set datafile separator ","
# the rows of one rank count, in the order of E
rows(n) = sprintf("< awk -F, 'NR > 1 && $2 == %s' %s", n, in)
set logscale x 2
set xtics (64, 256, 1024, 2048)
set xrange [48:2800]
set grid
set key top left
set xlabel "elements per packet"
set multiplot layout 1,2 title "cais-switch pipeline on one lcore, RESULT generation included"
set title "payload Gb/s: pipeline (solid) and add kernel (dashed)"
set ylabel "Gb/s of DATA payload"
set yrange [0:*]
plot for [n in "2 4 8 16"] rows(n) using 1:4 with linespoints lw 2 title sprintf("pipeline, %s ranks", n), \
     for [n in "2 4 8 16"] rows(n) using 1:7 with lines dt 2 lw 1 title sprintf("kernel, %s ranks", n)
set title "pipeline / add-kernel limit (goal >= 0.7 for E >= 256)"
set ylabel "ratio"
set yrange [0:1.4]
plot for [n in "2 4 8 16"] rows(n) using 1:8 with linespoints lw 2 title sprintf("%s ranks", n), \
     0.7 with lines lc rgb "red" dt 3 title "goal 0.7"
unset multiplot
