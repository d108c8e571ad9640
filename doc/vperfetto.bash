# bash completion for vperfetto's programs: options from each program's
# --help, and the values of the options that have a fixed set.

_vperfetto()
{
    local cur prev words cword split
    _init_completion -s || return

    case $prev in
        --clock)
            COMPREPLY=($(compgen -W 'boottime monotonic' -- "$cur"))
            return
            ;;
        --domain)
            COMPREPLY=($(compgen -W "$(virsh -q list --all --name 2>/dev/null)" \
                -- "$cur"))
            return
            ;;
        --onto)
            COMPREPLY=($(compgen -W 'host guest guest:1 guest:2' -- "$cur"))
            return
            ;;
        --vm-pid | --qemu-pid | --guest-vm-pid)
            _pids
            return
            ;;
        --tracefs | --out-dir | --kvm-debugfs)
            _filedir -d
            return
            ;;
        --period-ms | --exchange-period-ms | --count | --threads | \
            --stop-timeout | --start-grace | --guest-timeout | \
            --sync-vsock-port | \
            --guest-vsock | --libvirt-uri | -t | --time | -b | --buffer | \
            -Q | --query-string | --track-event | --detach | --attach | \
            --guest-tsc-offset | --guest-tsc-scaling | --producer-socket | \
            --consumer-socket | --remote-producer | --host | --listen | \
            --max-inflate | --init-timeout-ms | --max-conns-per-uid | \
            --max-conns)
            return
            ;;
    esac
    $split && return

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W '$(_parse_help "$1") $(_parse_usage "$1")' \
            -- "$cur"))
        [[ ${COMPREPLY-} == *= ]] && compopt -o nospace
        return
    fi
    _filedir
} &&
    complete -F _vperfetto vperfetto vtraced vtraced_probes vperfetto_merge \
        vperfetto_record vperfetto_tp vperfetto_host_clock \
        vperfetto_guest_agent vperfetto_guest_ctl

# ex: filetype=sh
