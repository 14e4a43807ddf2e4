!> melissa_trainer_setup: creating, configuring, declaring and starting a client (module
!> melissa_trainer re-exports all of it: use that one). Fortran shapes are reversed into
!> the protocol's C order here (see melissa_trainer.f90).
module melissa_trainer_setup
  use, intrinsic :: iso_c_binding
  use melissa_trainer_c
  use melissa_trainer_core
  implicit none
  private

  public :: mt_create, mt_set_simulation_id, mt_set_endpoints, mt_set_rendezvous, &
            mt_set_parameter, mt_set_send_timeout, mt_set_close_timeout, mt_set_batching, &
            mt_set_sndhwm, mt_set_reuse, mt_set_rank, mt_declare_field, mt_declare_part, &
            mt_declare_part_count, mt_start, mt_set_disconnected_timeout, &
            mt_set_replay_bytes, mt_set_follow_timeout, mt_set_curve_server_key, &
            mt_set_failed_close_timeout

  interface mt_declare_field
    module procedure declare_field_i32, declare_field_i64
  end interface

contains

  ! -- set-up ---------------------------------------------------------------------------

  !> Create the client (with the defaults; the launcher's environment configures it).
  subroutine mt_create(client, ierr)
    type(mt_client_t), intent(inout) :: client
    integer, intent(out), optional :: ierr
    if (c_associated(client%handle)) then
      call mt_finish(client, MT_ESTATE, 'mt_create', ierr, 'mt_create: this client was ' &
                     // 'already created (mt_close or mt_abort it first)')
      return
    end if
    call mt_finish(client, int(mt_client_create_c(client%handle)), 'mt_create', ierr)
  end subroutine

  subroutine mt_set_simulation_id(client, simulation_id, ierr)
    type(mt_client_t), intent(inout) :: client
    integer(c_int64_t), intent(in) :: simulation_id
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_simulation_id_c(client%handle, simulation_id)), &
                   'mt_set_simulation_id', ierr)
  end subroutine

  !> Comma-separated receiver endpoints (overrides MELISSA_TRAINER_ENDPOINTS); with
  !> CURVE, the receivers' public key in MELISSA_TRAINER_KEY.
  subroutine mt_set_endpoints(client, endpoints, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: endpoints
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_endpoints_c(client%handle, c_string(endpoints))), &
                   'mt_set_endpoints', ierr)
  end subroutine

  subroutine mt_set_rendezvous(client, directory, timeout_s, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: directory
    real(c_double), intent(in) :: timeout_s
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_rendezvous_c(client%handle, c_string(directory), &
                   timeout_s)), 'mt_set_rendezvous', ierr)
  end subroutine

  subroutine mt_set_parameter(client, name, value, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: name
    real(c_double), intent(in) :: value
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_parameter_c(client%handle, c_string(name), value)), &
                   'mt_set_parameter', ierr)
  end subroutine

  !> Seconds an mt_send may block on back-pressure (< 0: forever, the default).
  subroutine mt_set_send_timeout(client, seconds, ierr)
    type(mt_client_t), intent(inout) :: client
    real(c_double), intent(in) :: seconds
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_send_timeout_c(client%handle, seconds)), &
                   'mt_set_send_timeout', ierr)
  end subroutine

  !> Seconds mt_close waits without progress (default MT_DEFAULT_CLOSE_TIMEOUT, 1800, the
  !> Python client's; < 0: forever): each progress of the delivery or the receipts counts it again.
  subroutine mt_set_close_timeout(client, seconds, ierr)
    type(mt_client_t), intent(inout) :: client
    real(c_double), intent(in) :: seconds
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_close_timeout_c(client%handle, seconds)), &
                   'mt_set_close_timeout', ierr)
  end subroutine

  !> Seconds a close without BYE (a time step incomplete) waits in all for what is queued
  !> (default MT_DEFAULT_FAILED_CLOSE_TIMEOUT, 10, the Python client's failed_close_timeout;
  !> < 0: only the close timeout bounds it; the lower of the two is the bound).
  subroutine mt_set_failed_close_timeout(client, seconds, ierr)
    type(mt_client_t), intent(inout) :: client
    real(c_double), intent(in) :: seconds
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_failed_close_timeout_c(client%handle, seconds)), &
                   'mt_set_failed_close_timeout', ierr)
  end subroutine

  !> Seconds mt_close (external mode: endpoints from a rendezvous, launched by no one)
  !> waits for a receiver that neither confirms its BYE nor is connected before it calls
  !> the trainer gone: MT_ETIMEDOUT (default 60; < 0: never, the close timeout bounds it).
  subroutine mt_set_disconnected_timeout(client, seconds, ierr)
    type(mt_client_t), intent(inout) :: client
    real(c_double), intent(in) :: seconds
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_disconnected_timeout_c(client%handle, seconds)), &
                   'mt_set_disconnected_timeout', ierr)
  end subroutine

  !> The replay window in bytes (mt_set_replay_bytes of melissa_trainer.h): copies of the
  !> last steps sent, so that a solver started by hand follows a trainer restarted from
  !> its checkpoint (default: $MELISSA_TRAINER_REPLAY_BYTES, else 64 MiB in external
  !> mode; 0: none, a restarted trainer fails mt_close with MT_ETIMEDOUT).
  subroutine mt_set_replay_bytes(client, bytes, ierr)
    type(mt_client_t), intent(inout) :: client
    integer(c_int64_t), intent(in) :: bytes
    integer, intent(out), optional :: ierr
    if (bytes < 0) then
      call mt_finish(client, MT_EINVAL, 'mt_set_replay_bytes', ierr, &
                     'mt_set_replay_bytes: bytes must be >= 0')
      return
    end if
    call mt_finish(client, int(mt_set_replay_bytes_c(client%handle, bytes)), &
                   'mt_set_replay_bytes', ierr)
  end subroutine

  !> Seconds mt_close, finding its trainer gone, waits for a restarted one to publish in
  !> the rendezvous before it gives up (default 120; < 0: no bound).
  subroutine mt_set_follow_timeout(client, seconds, ierr)
    type(mt_client_t), intent(inout) :: client
    real(c_double), intent(in) :: seconds
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_follow_timeout_c(client%handle, seconds)), &
                   'mt_set_follow_timeout', ierr)
  end subroutine

  !> The receivers' CURVE public key, 40 Z85 characters (mt_set_curve_server_key of
  !> melissa_trainer.h): for endpoints given (mt_set_endpoints, MELISSA_TRAINER_ENDPOINTS)
  !> it takes precedence over MELISSA_TRAINER_KEY; with a rendezvous it must be the key its
  !> files publish (else MT_EINVAL at mt_start). A key that is not Z85: MT_EINVAL here.
  !> Trailing blanks are dropped (a Fortran string's padding).
  subroutine mt_set_curve_server_key(client, key, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: key
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_curve_server_key_c(client%handle, c_string(key))), &
                   'mt_set_curve_server_key', ierr)
  end subroutine

  !> Batching: payloads of at most bytes/2 are coalesced into messages of about `bytes`,
  !> held at most `delay_s` (defaults 65536 and 0.02; bytes = 0: no batching).
  subroutine mt_set_batching(client, bytes, delay_s, ierr)
    type(mt_client_t), intent(inout) :: client
    integer(c_int64_t), intent(in) :: bytes
    real(c_double), intent(in) :: delay_s
    integer, intent(out), optional :: ierr
    if (bytes < 0) then
      call mt_finish(client, MT_EINVAL, 'mt_set_batching', ierr, &
                     'mt_set_batching: bytes must be >= 0')
      return
    end if
    call mt_finish(client, int(mt_set_batching_c(client%handle, int(bytes, c_size_t), &
                   delay_s)), 'mt_set_batching', ierr)
  end subroutine

  !> ZeroMQ's send high-water mark, in messages (default 1000).
  subroutine mt_set_sndhwm(client, messages, ierr)
    type(mt_client_t), intent(inout) :: client
    integer, intent(in) :: messages
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_sndhwm_c(client%handle, int(messages, c_int))), &
                   'mt_set_sndhwm', ierr)
  end subroutine

  !> When a sent array may be written again: MT_REUSE_IMMEDIATE (default: when mt_send
  !> returns) or MT_REUSE_NEXT_SEND (after the next mt_send, mt_flush or mt_close).
  subroutine mt_set_reuse(client, mode, ierr)
    type(mt_client_t), intent(inout) :: client
    integer, intent(in) :: mode
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_reuse_c(client%handle, int(mode, c_int))), &
                   'mt_set_reuse', ierr)
  end subroutine

  !> This process's rank among `size` (default 0 of 1; mt_start_mpi sets it).
  subroutine mt_set_rank(client, rank, size, ierr)
    type(mt_client_t), intent(inout) :: client
    integer, intent(in) :: rank, size
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_rank_c(client%handle, int(rank, c_int), &
                   int(size, c_int))), 'mt_set_rank', ierr)
  end subroutine

  !> Declare a field of element type `dtype` (MT_FLOAT32, ...) and GLOBAL shape `shape`,
  !> given as the Fortran shape (column-major; reversed for the protocol, see the module
  !> header). An empty `shape` declares a scalar.
  subroutine declare_field_i32(client, name, dtype, shape, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: name
    integer, intent(in) :: dtype
    integer(c_int32_t), intent(in) :: shape(:)
    integer, intent(out), optional :: ierr
    call declare_field_i64(client, name, dtype, int(shape, c_int64_t), ierr)
  end subroutine

  subroutine declare_field_i64(client, name, dtype, shape, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: name
    integer, intent(in) :: dtype
    integer(c_int64_t), intent(in) :: shape(:)
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: reversed(max(1, size(shape)))
    integer :: k
    character(len=24) :: text
    do k = 1, size(shape)
      if (shape(k) < 0) then
        write (text, '(i0)') shape(k)
        call mt_finish(client, MT_EINVAL, 'mt_declare_field', ierr, "field '" // &
                       trim(name) // "': shape has the negative extent " // trim(text))
        return
      end if
    end do
    reversed = 0
    reversed(1:size(shape)) = shape(size(shape):1:-1)
    call mt_finish(client, int(mt_declare_field_c(client%handle, c_string(name), &
                   int(dtype, c_int), int(size(shape), c_int), reversed)), &
                   'mt_declare_field', ierr)
  end subroutine

  !> This rank's part [offset, offset + count) of the field's flattened global array,
  !> in elements, 0-based, in memory (column-major) order.
  subroutine mt_declare_part(client, name, offset, count, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: offset, count
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_declare_part_c(client%handle, c_string(name), offset, &
                   count)), 'mt_declare_part', ierr)
  end subroutine

  !> This rank's element count of a field; mt_start_mpi (module melissa_trainer_mpi)
  !> computes the offsets, in rank order.
  subroutine mt_declare_part_count(client, name, count, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: count
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_declare_part_count_c(client%handle, c_string(name), &
                   count)), 'mt_declare_part_count', ierr)
  end subroutine

  !> Connect to the receivers and queue HELLO (mt_client_start).
  subroutine mt_start(client, ierr)
    type(mt_client_t), intent(inout) :: client
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_client_start_c(client%handle)), 'mt_start', ierr)
  end subroutine

end module melissa_trainer_setup
