import json

from collectors.host import parse_cpu_list

POD = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def test_slurm_jobs_come_from_the_environment_or_the_cgroup_path(fake_host):
    fake_host.process(10, env={"SLURM_JOB_ID": "4746", "HOME": "/home/jbeck"})
    fake_host.process(11, cgroup="0::/system.slice/slurmstepd.scope/job_4747/step_batch/user/task_0")
    mapping = fake_host.mapping("slurm")

    assert [mapping.job_of(10), mapping.job_of(11), mapping.job_of(12)] == ["4746", "4747", None]


def test_a_kubernetes_pod_is_found_by_its_uid_in_either_cgroup_driver(fake_host):
    fake_host.process(20, cgroup=f"0::/kubepods/burstable/pod{POD}/cri-containerd-abc")
    systemd = POD.replace("-", "_")
    fake_host.process(
        21, cgroup=f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{systemd}.slice/x"
    )
    mapping = fake_host.mapping("kubernetes")

    assert mapping.job_of(20) == mapping.job_of(21) == POD


def test_a_pods_file_names_the_job_by_namespace_and_pod_or_by_its_job_label(fake_host, tmp_path):
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({POD: {"namespace": "nlp", "name": "trainer-0", "labels": {}}}))
    fake_host.process(20, cgroup=f"0::/kubepods/pod{POD}/c1")

    assert fake_host.mapping("kubernetes", k8s_pods_file=str(pods)).job_of(20) == "nlp/trainer-0"
    pods.write_text(json.dumps({POD: {"namespace": "nlp", "name": "t", "labels": {"gpu-governance/job": "run-9"}}}))
    assert fake_host.mapping("kubernetes", k8s_pods_file=str(pods)).job_of(20) == "run-9"


def test_the_label_fallback_reads_the_configured_variable_and_mappers_go_in_order(fake_host):
    fake_host.process(30, env={"GPU_COLLECTOR_JOB": "notebook-7"})
    fake_host.process(31, env={"GPU_COLLECTOR_JOB": "label-job", "SLURM_JOB_ID": "99"})

    assert fake_host.mapping().job_of(30) == "notebook-7"
    assert fake_host.mapping().job_of(31) == "99"
    assert fake_host.mapping("label", job_env="RUN_ID").job_of(30) is None


def test_allowed_cpus_are_mapped_to_numa_nodes(fake_host):
    fake_host.process(40, cpus="20-27")
    fake_host.process(41, cpus="30,32-33")

    assert fake_host.mapping().cpu_numa_nodes(40) == [0, 1]
    assert fake_host.mapping().cpu_numa_nodes(41) == [1]
    assert fake_host.mapping().cpu_numa_nodes(42) is None
    assert parse_cpu_list("0-2,8,10-11\n") == {0, 1, 2, 8, 10, 11}
