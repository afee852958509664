//! `container.id` and `k8s.pod.uid` from the cgroup paths of each runtime, as the kernel
//! prints them in `/proc/PID/cgroup`, and hostile text bounded.

use crate::export::otlp::{Container, parse_cgroup};

const ID: &str = "4e1f6b2a9c3d5e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7";
const POD: &str = "0f2d7a9e-1b3c-4d5e-8f6a-7b8c9d0e1f2a";

fn container(pod: Option<&str>) -> Container {
    Container {
        id: Some(ID.to_owned()),
        pod_uid: pod.map(str::to_owned),
    }
}

/// Each runtime's path shapes, cgroup v1 and v2, with the systemd and cgroupfs drivers: the
/// container id, and the pod uid (dashes, however the path spelt it) under Kubernetes.
#[test]
fn runtimes_path_shapes() {
    let pod_ = POD.replace('-', "_");
    let cases = [
        // Docker.
        (format!("12:pids:/docker/{ID}\n11:memory:/docker/{ID}\n0::/\n"), None),
        (format!("0::/system.slice/docker-{ID}.scope\n"), None),
        // containerd under Kubernetes: cgroupfs (v1) and systemd (v2) drivers.
        (
            format!("4:memory:/kubepods/burstable/pod{POD}/{ID}\n1:cpu:/kubepods/burstable/pod{POD}/{ID}\n"),
            Some(POD),
        ),
        (
            format!(
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod_}.slice/cri-containerd-{ID}.scope\n"
            ),
            Some(POD),
        ),
        (
            format!("0::/kubepods.slice/kubepods-pod{pod_}.slice/cri-containerd-{ID}.scope\n"),
            Some(POD),
        ),
        // CRI-O.
        (
            format!(
                "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{pod_}.slice/crio-{ID}.scope\n"
            ),
            Some(POD),
        ),
        // podman: rootful (v2, with its nested `container` cgroup), rootless, and v1.
        (format!("0::/machine.slice/libpod-{ID}.scope/container\n"), None),
        (
            format!("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope\n"),
            None,
        ),
        (format!("10:pids:/libpod_parent/libpod-{ID}\n"), None),
    ];
    for (text, pod) in cases {
        assert_eq!(parse_cgroup(&text), container(pod), "{text}");
    }
}

/// Not containers: the host's own cgroups, user sessions, the runtimes' conmon monitors, and
/// ids of the wrong shape (short, upper case, non-hex).
#[test]
fn no_container_where_there_is_none() {
    let cases = [
        "0::/init.scope\n".to_owned(),
        "0::/user.slice/user-1000.slice/session-3.scope\n".to_owned(),
        "9:name=systemd:/init.scope\n4:memory:/process_api/4608087f04136dd6e3bbeb477da9b0c0\n0::/init.scope\n"
            .to_owned(),
        format!("0::/kubepods.slice/crio-conmon-{ID}.scope\n"),
        format!("0::/machine.slice/libpod-conmon-{ID}.scope\n"),
        format!("0::/docker/{}\n", &ID[..63]),
        format!("0::/docker/{}\n", ID.to_ascii_uppercase()),
        format!("0::/docker/{}g\n", &ID[..63]),
        format!("0::/docker-{ID}x.scope\n"),
        String::new(),
        "garbage without colons\n".to_owned(),
    ];
    for text in cases {
        assert_eq!(parse_cgroup(&text), Container::default(), "{text}");
    }
}

/// A pod uid needs the exact `pod<uuid>` shape after a `-` (or alone): a segment merely holding
/// `pod` or a malformed uuid gives none, while the container id is still found.
#[test]
fn pod_uids_need_their_exact_shape() {
    for segment in [
        format!("mypod{POD}"),
        format!("kubepods-pod{}", &POD[..35]),
        format!("kubepods-pod{}x.slice", POD),
        "kubepods".to_owned(),
    ] {
        let text = format!("0::/{segment}/cri-containerd-{ID}.scope\n");
        assert_eq!(parse_cgroup(&text), container(None), "{text}");
    }
}

/// Hostile text is bounded: lines past the 64th and lines longer than 4096 bytes are not looked
/// at, and a huge file costs no more than that.
#[test]
fn hostile_text_is_bounded() {
    let filler = "1:x:/\n".repeat(64);
    let late = format!("{filler}0::/docker/{ID}\n");
    assert_eq!(parse_cgroup(&late), Container::default());
    let long = format!("0::/{}/docker/{ID}\n", "a".repeat(5000));
    assert_eq!(parse_cgroup(&long), Container::default());
    let huge = format!("0::/docker/{ID}\n{}", "/".repeat(10 << 20));
    assert_eq!(parse_cgroup(&huge), container(None));
}
