/*
 * The stand-in's libmlx5: the mlx5dv_* entry points rdma-direct resolves, forwarding to the
 * model in the stand-in's libibverbs (verbs.c), which this library is linked against.
 * Built a second time with -DSTANDIN_OLD_LIBMLX5: a libmlx5 from before mlx5dv_create_qp
 * (rdma-core 17), to test the error a user with an old rdma-core gets.
 */
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#define EXPORT __attribute__((visibility("default")))

bool rdma_direct_standin_mlx5dv_is_supported(struct ibv_device *d);
int rdma_direct_standin_mlx5dv_query_device(struct ibv_context *c, struct mlx5dv_context *a);
struct ibv_qp *rdma_direct_standin_mlx5dv_create_qp(struct ibv_context *c,
						   struct ibv_qp_init_attr_ex *a,
						   struct mlx5dv_qp_init_attr *dv);
int rdma_direct_standin_mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t type);
int rdma_direct_standin_mlx5dv_get_clock_info(struct ibv_context *c,
					      struct mlx5dv_clock_info *out);

EXPORT bool mlx5dv_is_supported(struct ibv_device *d)
{
	return rdma_direct_standin_mlx5dv_is_supported(d);
}

EXPORT int mlx5dv_query_device(struct ibv_context *c, struct mlx5dv_context *a)
{
	return rdma_direct_standin_mlx5dv_query_device(c, a);
}

#ifndef STANDIN_OLD_LIBMLX5
EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *c, struct ibv_qp_init_attr_ex *a,
				       struct mlx5dv_qp_init_attr *dv)
{
	return rdma_direct_standin_mlx5dv_create_qp(c, a, dv);
}
#endif

EXPORT int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t type)
{
	return rdma_direct_standin_mlx5dv_init_obj(obj, type);
}

EXPORT int mlx5dv_get_clock_info(struct ibv_context *c, struct mlx5dv_clock_info *out)
{
	return rdma_direct_standin_mlx5dv_get_clock_info(c, out);
}
