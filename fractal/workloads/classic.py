"""Classic machine learning: k-NN classification, a k-Means iteration, an RBF-kernel SVM and
Gaussian naive Bayes, written with the core opcodes alone.

The language has no literals and no conversion from i32 to f32, so two idioms recur:
constants come from data (x - x = 0, exp(0) = 1, an `argsort` of equal keys = 0, 1, 2, ...),
and an i32 0/1 mask becomes f32 through a `gather` from a table whose rows are (0, 1).
"""
from __future__ import annotations

from fractal.workloads.base import Param, Workload, param_error
from fractal.workloads.builder import ProgramBuilder

__all__ = ["KNN", "KMEANS", "SVM_RBF", "GAUSSIAN_NB"]


def _not_above(name: str, value: int, limit_name: str, limit: int):
    if value > limit:
        raise param_error(name, f"{name}={value} must not exceed {limit_name}={limit}")


def _class_ids(b: ProgramBuilder, zeros_i32: str, count: int, name: str) -> str:
    """i32[count, 1] holding 0, 1, ..., count-1: the stable order of `count` equal keys.

    `zeros_i32` is an i32[1, n] row of zeros with n >= count."""
    row = b.tensor(f"{name}_keys", (1, count), dtype="i32")
    ids = b.tensor(f"{name}_row", (1, count), dtype="i32")
    col = b.tensor(name, (count, 1), dtype="i32")
    b.op("slice", row, zeros_i32, axis=1)
    b.op("argsort", ids, row, note=f"0, 1, ..., {count - 1}: equal keys keep their order")
    return b.op("reshape", col, ids)


# ---------------------------------------------------------------- k-NN

def _knn(b: ProgramBuilder, batch, points, features, k, classes) -> list[str]:
    _not_above("k", k, "points", points)
    _not_above("classes", classes, "points", points)
    q = b.tensor("queries", (batch, features), "input")
    ref = b.tensor("reference", (points, features), "param", note="labelled reference points")
    ref_labels = b.tensor("reference_labels", (points,), "param", "i32",
                          note=f"class of each reference point, 0 .. {classes - 1}")
    dist = b.tensor("dist", (batch, points), note="squared Euclidean distances")
    order = b.tensor("order", (batch, points), dtype="i32", note="reference points, nearest first")
    nearest = b.tensor("neighbors", (batch, k), "output", "i32", note=f"the {k} nearest, in order")
    zeros = b.tensor("zeros", (batch, points), dtype="i32")
    label_rows = b.tensor("label_rows", (batch, points), dtype="i32")
    nn_labels = b.tensor("neighbor_labels", (batch, k), dtype="i32")
    nn_labels3 = b.tensor("neighbor_labels3", (batch, 1, k), dtype="i32")
    zero_row = b.tensor("zero_row", (1, points), dtype="i32")
    offsets = b.tensor("offsets", (batch, classes, k), dtype="i32")
    votes = b.tensor("votes", (batch, classes), "output", "i32", note="neighbors in each class")
    labels = b.tensor("labels", (batch,), "output", "i32",
                      note="the class with most votes (the smallest on ties)")
    b.section("the k nearest reference points")
    b.op("eucdist", dist, q, ref)
    b.op("argsort", order, dist)
    b.op("slice", nearest, order, axis=1)
    b.section("their labels")
    b.op("sub", zeros, order, order)
    b.op("add", label_rows, zeros, ref_labels, note="the labels repeated for every query")
    b.op("gather", nn_labels, label_rows, nearest)
    b.section("majority vote")
    b.op("slice", zero_row, zeros, axis=0)
    ids = _class_ids(b, zero_row, classes, "class_ids")
    b.op("reshape", nn_labels3, nn_labels)
    b.op("sub", offsets, nn_labels3, ids, note="0 where a neighbor is of that class")
    b.op("count", votes, offsets, value=0)
    b.op("argmax", labels, votes, axis=1)
    return [f"k-nearest-neighbour classification: {batch} queries against {points} labelled "
            f"points in {features}-D, majority vote of the k = {k} nearest among {classes} classes."]


KNN = Workload(
    "knn_classifier", "k-NN classification: k nearest by squared Euclidean distance, majority vote",
    {"batch": Param(64, "queries per run"),
     "points": Param(1024, "labelled reference points"),
     "features": Param(32, "features per point"),
     "k": Param(5, "neighbours that vote"),
     "classes": Param(10, "classes (reference labels lie in 0 .. classes-1)")},
    _knn)


# ---------------------------------------------------------------- k-Means

def _kmeans(b: ProgramBuilder, batch, features, clusters) -> list[str]:
    _not_above("clusters", clusters, "batch", batch)
    n, d, k = batch, features, clusters
    points = b.tensor("points", (n, d), "input")
    centroids = b.tensor("centroids", (k, d), "param", note="the current cluster centres")
    dist = b.tensor("dist", (n, k))
    labels = b.tensor("labels", (n,), "output", "i32", note="nearest centroid of each point")
    label_row = b.tensor("label_row", (1, n), dtype="i32")
    zero_row = b.tensor("zero_row", (1, n), dtype="i32")
    offsets = b.tensor("offsets", (k, n), dtype="i32")
    offsets3 = b.tensor("offsets3", (k, n, 1), dtype="i32")
    member = b.tensor("member", (k, n), dtype="i32", note="1 where point n is in cluster k")
    column = b.tensor("column", (k, 1))
    zero = b.tensor("zero", (k, 1))
    one = b.tensor("one", (k, 1))
    table = b.tensor("table", (k, 2), note="rows (0, 1): the float value of a 0/1 mask")
    onehot = b.tensor("onehot", (k, n))
    sums = b.tensor("sums", (k, d))
    sizes = b.tensor("sizes", (k,))
    size_col = b.tensor("size_col", (k, 1))
    empty = b.tensor("empty", (k, 1), note="1 for a cluster with no points, else 0")
    kept = b.tensor("kept", (k, d))
    new = b.tensor("new_centroids", (k, d), "output",
                   note="mean of each cluster's points (an empty cluster keeps its centre)")
    dist_t = b.tensor("dist_t", (k, n))
    own = b.tensor("own", (k, n))
    per_cluster = b.tensor("per_cluster", (k,))
    inertia = b.tensor("inertia", (), "output", note="sum of squared distances to own centroid")
    b.section("assignment")
    b.op("eucdist", dist, points, centroids)
    b.op("argmin", labels, dist, axis=1)
    b.section("membership mask: cluster ids 0 .. k-1 against the labels")
    b.op("reshape", label_row, labels)
    b.op("sub", zero_row, label_row, label_row)
    ids = _class_ids(b, zero_row, k, "cluster_ids")
    b.op("sub", offsets, label_row, ids)
    b.op("reshape", offsets3, offsets)
    b.op("count", member, offsets3, value=0)
    b.op("slice", column, centroids, axis=1)
    b.op("sub", zero, column, column)
    b.op("exp", one, zero)
    b.op("concat", table, zero, one, axis=1)
    b.op("gather", onehot, table, member, note="the mask as floats")
    b.section("update: each centroid moves to the mean of its points")
    b.op("matmul", sums, onehot, points)
    b.op("reduce_sum", sizes, onehot, axis=1)
    b.op("reshape", size_col, sizes)
    b.op("sub", empty, one, size_col)
    b.op("relu", empty, empty)
    b.op("mul", kept, centroids, empty)
    b.op("add", sums, sums, kept)
    b.op("add", size_col, size_col, empty)
    b.op("div", new, sums, size_col)
    b.section("objective")
    b.op("transpose", dist_t, dist, perm=(1, 0))
    b.op("mul", own, dist_t, onehot)
    b.op("reduce_sum", per_cluster, own, axis=1)
    b.op("reduce_sum", inertia, per_cluster, axis=0)
    return [f"One k-Means (Lloyd) iteration: assign {n} points in {d}-D to the nearest of {k} "
            f"centroids, move each centroid to the mean of its points, and the objective."]


KMEANS = Workload(
    "kmeans_iteration", "one k-Means iteration: assignment, centroid update, objective",
    {"batch": Param(1024, "points to cluster"),
     "features": Param(16, "features per point"),
     "clusters": Param(8, "clusters k")},
    _kmeans)


# ---------------------------------------------------------------- SVM

def _svm(b: ProgramBuilder, batch, features, support_vectors, classes) -> list[str]:
    x = b.tensor("x", (batch, features), "input")
    sv = b.tensor("support_vectors", (support_vectors, features), "param")
    coef = b.tensor("dual_coef", (support_vectors, classes), "param",
                    note="alpha_i * y_i of each support vector, per class")
    intercept = b.tensor("intercept", (classes,), "param")
    gamma = b.tensor("gamma", (1,), "param", note="kernel width: K(x, s) = exp(-gamma |x - s|^2)")
    dist = b.tensor("dist", (batch, support_vectors))
    kernel = b.tensor("kernel", (batch, support_vectors))
    zero = b.tensor("zero", (1,))
    neg_gamma = b.tensor("neg_gamma", (1,))
    decision = b.tensor("decision", (batch, classes), "output", note="one-vs-rest decision values")
    labels = b.tensor("labels", (batch,), "output", "i32", note="the class of largest decision")
    b.op("eucdist", dist, x, sv)
    b.op("sub", zero, gamma, gamma)
    b.op("sub", neg_gamma, zero, gamma)
    b.op("mul", kernel, dist, neg_gamma)
    b.op("exp", kernel, kernel, note="RBF kernel")
    b.op("matmul", decision, kernel, coef)
    b.op("add", decision, decision, intercept)
    b.op("argmax", labels, decision, axis=1)
    return [f"Support vector machine inference with an RBF kernel: {batch} samples of {features} "
            f"features against {support_vectors} support vectors, {classes} one-vs-rest classes."]


SVM_RBF = Workload(
    "svm_rbf", "SVM inference, RBF kernel: decision = exp(-gamma |x - s|^2) @ dual_coef + intercept",
    {"batch": Param(64, "samples per run"),
     "features": Param(32, "features per sample"),
     "support_vectors": Param(256, "support vectors"),
     "classes": Param(10, "one-vs-rest decision functions")},
    _svm)


# ---------------------------------------------------------------- Gaussian naive Bayes

def _gaussian_nb(b: ProgramBuilder, batch, features, classes) -> list[str]:
    n, f, k = batch, features, classes
    x = b.tensor("x", (n, f), "input")
    means = b.tensor("means", (k, f), "param", note="per-class feature means")
    log_var = b.tensor("log_var", (k, f), "param", note="per-class feature log variances")
    log_prior = b.tensor("log_prior", (k,), "param", note="log class priors")
    var = b.tensor("var", (k, f))
    prec = b.tensor("precision", (k, f), note="1 / variance")
    mean_prec = b.tensor("mean_precision", (k, f))
    prec_t = b.tensor("precision_t", (f, k))
    mean_prec_t = b.tensor("mean_precision_t", (f, k))
    x_sq = b.tensor("x_sq", (n, f))
    quad = b.tensor("quad", (n, k))
    cross = b.tensor("cross", (n, k))
    mean_sq = b.tensor("mean_sq", (k, f))
    per_class = b.tensor("per_class", (k,))
    log_det = b.tensor("log_det", (k,))
    two = b.tensor("two", (1,))
    joint = b.tensor("joint", (n, k), "output",
                     note="log P(class) + log P(x | class) + F/2 log(2 pi)")
    b.section("1 / variance, from the log variances")
    b.op("exp", var, log_var)
    _, one = b.zero_and_one(log_prior)
    b.op("div", prec, one, var)
    b.op("mul", mean_prec, means, prec)
    b.op("transpose", prec_t, prec, perm=(1, 0))
    b.op("transpose", mean_prec_t, mean_prec, perm=(1, 0))
    b.section("sum_f (x - mean)^2 / var as matrix products: x^2 @ P' - 2 x @ (mean P)' + mean^2 P")
    b.op("mul", x_sq, x, x)
    b.op("matmul", quad, x_sq, prec_t)
    b.op("matmul", cross, x, mean_prec_t)
    b.op("add", cross, cross, cross)
    b.op("sub", quad, quad, cross)
    b.op("mul", mean_sq, mean_prec, means)
    b.op("reduce_sum", per_class, mean_sq, axis=1)
    b.op("reduce_sum", log_det, log_var, axis=1)
    b.op("add", per_class, per_class, log_det, note="plus sum_f log var")
    b.op("add", quad, quad, per_class)
    b.section("joint log likelihood and the most likely class")
    b.op("add", two, one, one)
    b.op("div", quad, quad, two)
    b.op("sub", joint, log_prior, quad)
    b.classify(joint)
    return [f"Gaussian naive Bayes inference: {batch} samples of {features} features, {classes} "
            f"classes; joint = log_prior - 1/2 sum_f (log var + (x - mean)^2 / var)."]


GAUSSIAN_NB = Workload(
    "gaussian_nb", "Gaussian naive Bayes: per-class normal likelihoods as matrix products, argmax",
    {"batch": Param(256, "samples per run"),
     "features": Param(32, "features per sample"),
     "classes": Param(10, "classes")},
    _gaussian_nb)
