# The end-to-end benefit curve: all-reduce time against size, in-network
# (cais), the agent's ring and MPI_Allreduce, one panel per rank count.
#   gnuplot -e "in='bench/results/e2e.csv'; out='bench/results/e2e.png'" bench/plot/e2e.gp
# The CSV is bench/e2e.sh --csv: ranks,bytes,cais_us,ring_us,mpi_us,cais_vs_ring,cais_vs_mpi,cais_path
if (!exists("in")) in = 'bench/results/e2e.csv'
if (!exists("out")) out = 'bench/results/e2e.png'
set terminal pngcairo size 1400,560 font ",10"
set output out
set termoption noenhanced
set datafile separator ","
set logscale xy 2
set grid
set key top left
set xlabel "all-reduce size (MiB)"
set ylabel "median time (ms)"
# the rows of one rank count, in the order of size
rows(r) = sprintf("< awk -F, 'NR > 1 && $1 == %s' %s", r, in)
ranks = system(sprintf("awk -F, 'NR > 1 { print $1 }' %s | sort -un | tr '\\n' ' '", in))
set multiplot layout 1, words(ranks) title "all-reduce (float, sum) through cais-switch on the namespace testbed"
do for [r in ranks] {
	set title sprintf("%s ranks", r)
	plot rows(r) using ($2 / 1048576.0):($3 / 1000) with linespoints lw 2 pt 7 title "cais (in-network)", \
	     rows(r) using ($2 / 1048576.0):($4 / 1000) with linespoints lw 2 pt 5 title "agent ring", \
	     rows(r) using ($2 / 1048576.0):($5 > 0 ? $5 / 1000 : 1/0) with linespoints lw 2 pt 9 title "MPI_Allreduce (OpenMPI, TCP)"
}
unset multiplot
