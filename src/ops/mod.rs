//! Built-in operators, written as tensor expressions, and their registry.
//!
//! Every op is `f32`. Inputs are listed in argument order; shapes use the
//! op's named parameters. Convolutions and pools read outside the input as 0
//! (pools: max ignores padding, avg divides by the full window `R*S`,
//! i.e. padding counts). Output sizes:
//! `O = (I + 2*pad - dilation*(K-1) - 1) / stride + 1` (floor), for every
//! spatial dimension `I` with kernel extent `K`.
//!
//! | op | parameters | inputs | output |
//! |----|------------|--------|--------|
//! | `matmul` | `M,N,K` | `A[M,K], B[K,N]` | `C[m,n] = Σk A[m,k]·B[k,n]` |
//! | `matmul_nt` | `M,N,K` | `A[M,K], B[N,K]` | `C[m,n] = Σk A[m,k]·B[n,k]` |
//! | `batch_matmul` | `B,M,N,K` | `A[B,M,K], B[B,K,N]` | `C[b,m,n] = Σk A[b,m,k]·B[b,k,n]` |
//! | `dense` | `M,N,K` | `data[M,K], weight[N,K]` | `out[m,n] = Σk data[m,k]·weight[n,k]` |
//! | `dense_bias` | `M,N,K` | `data, weight, bias[N]` | `dense + bias[n]` |
//! | `dense_bias_relu` | `M,N,K` | `data, weight, bias[N]` | `max(dense + bias[n], 0)` |
//! | `conv1d` | `N,C,L,K,R,stride,pad,dilation` | `data[N,C,L], weight[K,C,R]` | `out[n,k,x] = Σc,r data[n,c,x·stride+r·dilation−pad]·weight[k,c,r]` |
//! | `conv2d` | `N,C,H,W,K,R,S,stride,pad,dilation` | `data[N,C,H,W], weight[K,C,R,S]` | `out[n,k,y,x] = Σc,r,s data[n,c,y·st+r·dil−pad, x·st+s·dil−pad]·weight[k,c,r,s]` |
//! | `conv2d_bias` | `as conv2d` | `data[N,C,H,W], weight[K,C,R,S], bias[K]` | `conv2d + bias[k]` |
//! | `conv2d_nhwc` | `as conv2d` | `data[N,H,W,C], weight[R,S,C,K]` | `out[n,y,x,k] = Σr,s,c data[n,y·st+r·dil−pad, x·st+s·dil−pad, c]·weight[r,s,c,k]` |
//! | `conv2d_nhwc_bias` | `as conv2d` | `data[N,H,W,C], weight[R,S,C,K], bias[K]` | `conv2d_nhwc + bias[k]` |
//! | `group_conv2d` | `as conv2d + groups` | `data[N,C,H,W], weight[K,C/groups,R,S]` | `out[n,k,y,x] = Σc′,r,s data[n, g·(C/groups)+c′, …]·weight[k,c′,r,s], g = k / (K/groups)` |
//! | `depthwise_conv2d` | `N,C,H,W,R,S,stride,pad,dilation` | `data[N,C,H,W], weight[C,R,S]` | `out[n,c,y,x] = Σr,s data[n,c,y·st+r·dil−pad, x·st+s·dil−pad]·weight[c,r,s]` |
//! | `conv3d` | `N,C,D,H,W,K,T,R,S,stride,pad,dilation` | `data[N,C,D,H,W], weight[K,C,T,R,S]` | `out[n,k,z,y,x] = Σc,t,r,s data[n,c,z·st+t·dil−pad, y·st+r·dil−pad, x·st+s·dil−pad]·weight[k,c,t,r,s]` |
//! | `conv2d_transpose` | `N,C,H,W,K,R,S,stride,pad` | `data[N,C,H,W], weight[C,K,R,S]` | `out[N,K,OH,OW], OH=(H−1)·stride−2·pad+R; every data[n,c,h,w]·weight[c,k,r,s] adds to out[n,k,h·stride+r−pad, w·stride+s−pad] when that lies inside` |
//! | `conv2d_capsule` | `N,H,W,C,K,R,S,stride,pad,cap` | `data[N,H,W,cap,cap,C], weight[R,S,cap,cap,C,K]` | `out[n,y,x,i,j,k] = Σr,s,q,c data[n,y·st+r−pad, x·st+s−pad, i, q, c]·weight[r,s,q,j,c,k]` |
//! | `norm` | `B,M,N` | `A[B,M,N]` | `out[b] = sqrt(Σi,j A[b,i,j]²)` |
//! | `max_pool2d` | `N,C,H,W,R,S,stride,pad` | `data[N,C,H,W]` | `out[n,c,y,x] = max over the window inside the input (dilation 1)` |
//! | `avg_pool2d` | `N,C,H,W,R,S,stride,pad` | `data[N,C,H,W]` | `out[n,c,y,x] = (Σ window inside the input) / (R·S)` |
//! | `softmax` | `M,N` | `x[M,N]` | `e[m,n] = exp(x[m,n] − maxⱼ x[m,j])`; `row_inv[m] = 1 / Σⱼ e[m,j]`; `out[m,n] = e[m,n] · row_inv[m]` (one division per row) |
//! | `layer_norm` | `M,N` | `x[M,N], gamma[N], beta[N]` | `μ = Σx/N, σ² = Σ(x−μ)²/N, rstd = 1/sqrt(σ²+1e-5) per row; out = (x−μ)·rstd·gamma[n] + beta[n]` (one sqrt and division per row) |
//! | `relu` | `M,N` | `x[M,N]` | `max(x, 0)` |
//! | `gelu` | `M,N` | `x[M,N]` | `0.5·x·(1 + erf(x/√2))` |
//! | `bias_add` | `M,N` | `x[M,N], bias[N]` | `x[m,n] + bias[n]` |
//! | `conv2d_bn_relu` | `N,H,W,C,K,R,S,stride,pad,dilation` | `data[N,H,W,C], weight[R,S,C,K], bias[K], bn_scale[K], bn_offset[K]` | `max((conv2d_nhwc + bias[k])·bn_scale[k] + bn_offset[k], 0)` |
//! | `transpose_batch_matmul` | `B,L,H,D` | `query[B,L,H,D], value[B,L,H,D]` | `out[b,h,i,j] = Σd query[b,i,h,d]·value[b,j,h,d]` |
//!
//! Pools require `2·pad ≤ R` and `2·pad ≤ S`; grouped convolutions require
//! `groups` to divide both `C` and `K`. Every op checks that its output has at
//! least one element and names the parameters when it would not.

mod elementwise;
mod error;
mod linalg;
mod nn_conv;
mod nn_pool;
mod normalization;
mod registry;
mod shape;
mod subgraphs;
mod window;

pub use error::OpError;
pub use normalization::LAYER_NORM_EPS;
pub use registry::{BuildFn, OpSpec, Origin, find, registry};
pub use shape::{MAX_PARAM_VALUE, ParamSpec, ShapeParams};
