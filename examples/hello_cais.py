# CAIS_MANAGER=198.19.1.254:51735 CAIS_MANAGER_KEY=manager.key CAIS_IFNAME=eth0 CAIS_THRESHOLD=0 \
#   PYTHONPATH=$CAIS/python RANK=... WORLD_SIZE=4 MASTER_ADDR=... MASTER_PORT=29500 python3 hello_cais.py
import torch, torch.distributed as dist
import cais.torch                                # registers the backend "cais"
dist.init_process_group("cais")                  # every rank joins the job through cais-manager
for step in range(4):                            # a tensor's first two all-reduces take the ring, then the switch
    x = torch.full((1 << 20,), float(dist.get_rank() + 1), dtype=torch.bfloat16)  # 2 MiB of bf16
    dist.all_reduce(x)                           # through cais-switch (gloo: "Invalid scalar type")
    assert x[0].item() == sum(range(1, dist.get_world_size() + 1))
w = dist.all_reduce(torch.ones(1 << 18), op=dist.ReduceOp.MAX, async_op=True); w.wait()
dist.broadcast(torch.zeros(4), 0)                # not an all-reduce: the backend's own gloo group
dist.destroy_process_group()
